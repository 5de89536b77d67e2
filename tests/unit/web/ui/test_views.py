"""The web UI's pages as data, from folded states and errors (no Kafka: only the pages that
read the published data and the app's routes)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from conveyor import App, Consumer
from conveyor.admin.admin import PartitionInfo, TopicInfo
from conveyor.errors import KafkaError
from conveyor.instrumentation.monitor import Event
from conveyor.web.process.tracking import error_record
from conveyor.web.reading.data import WebData
from conveyor.web.ui import rendering
from conveyor.web.ui.views import PER_PAGE, NotFound, Views

NOW = 1_000_000.0


class Orders(Consumer):
    def consume(self) -> None:
        pass


class FakeData:
    """What :class:`Views` reads of :class:`~conveyor.web.reading.data.WebData`, held in memory."""

    def __init__(
        self,
        states: dict[str, dict[str, Any]] | None = None,
        series: dict[str, dict[str, Any]] | None = None,
        errors: list[dict[str, Any]] | None = None,
        heartbeat: dict[str, Any] | None = None,
    ) -> None:
        self._states = states or {}
        self._series = series or {}
        self._errors = errors or []
        self._heartbeat = heartbeat
        self.missing_topics: list[str] = []

    def states(self) -> dict[str, dict[str, Any]]:
        return dict(self._states)

    def heartbeat(self) -> dict[str, Any] | None:
        return self._heartbeat

    def series(self, resolution: str) -> dict[str, Any] | None:
        return self._series.get(resolution)

    def errors(self) -> list[dict[str, Any]]:
        return list(self._errors)

    def find_error(self, error_id: str) -> dict[str, Any] | None:
        return next((e for e in self._errors if e.get("id") == error_id), None)


def app() -> App:
    return App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})


def views(data: FakeData, the_app: App | None = None) -> Views:
    return Views((the_app or app()).web, cast(WebData, data), clock=lambda: NOW)


def state(
    pid: str,
    *,
    reported_at: float = NOW - 1,
    status: str = "running",
    interval: float = 5.0,
    partitions: list[dict[str, Any]] | None = None,
    jobs: list[dict[str, Any]] | None = None,
    slowest: list[dict[str, Any]] | None = None,
    messages_per_second: float = 0.0,
    lag: int = 0,
    swarm_node: int | None = None,
    swarm_supervisor: int | None = None,
    groups: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A folded process state, as the aggregator publishes it."""
    return {
        "swarm_node": swarm_node,
        "swarm_supervisor": swarm_supervisor,
        "id": pid,
        "client_id": "t",
        "seq": 1,
        "interval": interval,
        "reported_at": reported_at,
        "received_at": reported_at,
        "hostname": "box",
        "pid": 7,
        "started_at": NOW - 100,
        "state": status,
        "rss": 1000,
        "cpu": 0.1,
        "threads": 4,
        "utilization": 0.5,
        "messages_per_second": messages_per_second,
        "errors_per_second": 0.0,
        "counters": {"processed": 10},
        "pool": {"size": 2},
        "listeners": [{"name": g, "consumer_group": g, "topics": ["orders"]} for g in groups],
        "partitions": partitions or [],
        "jobs": jobs or [],
        "lag": lag,
        "slowest": slowest or [],
    }


def partition(topic: str, number: int, consumer: str = "Orders") -> dict[str, Any]:
    return {"topic": topic, "partition": number, "consumer": consumer, "lag": 0}


def job(topic: str, number: int, started_at: float) -> dict[str, Any]:
    return {
        "listener": topic,
        "topic": topic,
        "partition": number,
        "first_offset": 0,
        "last_offset": 9,
        "count": 10,
        "started_at": started_at,
    }


def error(
    error_id: str,
    *,
    kind: str = "consumer.consume.error",
    topic: str = "orders",
    process: str = "p1",
    exc: BaseException | None = None,
    at: float = NOW - 10,
) -> dict[str, Any]:
    """An error as the tracker publishes it and the reader gives it an id."""
    event = Event(
        "error.occurred",
        {
            "type": kind,
            "error": exc if exc is not None else ValueError("bad payload"),
            "topic": topic,
            "partition": 0,
            "first_offset": 5,
            "last_offset": 9,
            "consumer": Orders(),
            "attempt": 1,
        },
    )
    record = error_record(event, process, "t")
    record.update(id=error_id, at=at)
    return record


# -- processes --------------------------------------------------------------------------------


def test_processes_lists_each_state_with_its_status() -> None:
    data = FakeData(
        states={
            "b-running": state("b-running"),
            "a-dead": state("a-dead", reported_at=NOW - 16),  # 3 intervals of 5 s ago and more
            "c-stopped": state("c-stopped", status="stopped"),
            "d-quiet": state("d-quiet", status="quiet"),
        }
    )
    page = views(data).processes()
    rows = page.data["processes"]
    assert {r["id"]: r["status"] for r in rows} == {
        "b-running": "running",
        "a-dead": "dead",
        "c-stopped": "stopped",
        "d-quiet": "quiet",
    }
    # live ones first, each group by id
    assert [r["id"] for r in rows] == ["b-running", "d-quiet", "a-dead", "c-stopped"]
    assert page.data["paging"] == {"page": 1, "pages": 1, "total": 4}
    uptimes = {r["id"]: r["uptime"] for r in rows}
    assert uptimes["b-running"] == 100.0
    assert uptimes["a-dead"] is None
    assert uptimes["c-stopped"] is None


def test_processes_offer_quiet_and_stop_to_every_running_process_and_per_group() -> None:
    data = FakeData(
        states={
            "a": state("a", groups=("orders",)),
            "b": state("b", groups=("orders", "audit")),
            "c": state("c", groups=("audit",), status="quiet"),
            "dead": state("dead", groups=("billing",), reported_at=NOW - 16),
            "gone": state("gone", groups=("orders",), status="stopped"),
        }
    )
    page = views(data).processes()
    assert page.data["fleet"] == {
        "processes": 3,
        "groups": [{"group": "audit", "processes": 2}, {"group": "orders", "processes": 2}],
    }, "running and quiet ones, not dead nor stopped ones"
    environment = rendering.environment()

    def html(read_only: bool = False, may: Any = lambda action, target="": True) -> str:
        return environment.get_template("processes.html").render(
            **page.data, title=page.title, base="", client_id="t", active="processes",
            csrf_field="csrf_token", csrf_token="tok", user=None, login=False,
            read_only=read_only, request=None, can=may,
        )  # fmt: skip

    shown = html()
    assert 'id="fleet-quiet"' in shown
    assert 'id="fleet-stop"' in shown
    assert 'data-confirm="Quiet EVERY process of this web UI, all 3 running?' in shown
    assert 'data-confirm="Stop EVERY process of consumer group orders, all 2 running?' in shown
    assert shown.count('name="process" value="*"') == 6
    assert 'id="fleet-actions"' not in html(read_only=True)
    only_groups = html(may=lambda action, target="": target.startswith("* in group "))
    assert 'id="fleet-quiet"' not in only_groups, "the policy is asked about every process"
    assert only_groups.count('class="fleet-quiet"') == 2
    nothing = views(FakeData(states={"gone": state("gone", status="stopped")})).processes()
    assert nothing.data["fleet"] == {"processes": 0, "groups": []}


def test_a_swarms_nodes_are_listed_together_under_their_supervisor() -> None:
    data = FakeData(
        states={
            "a-alone": state("a-alone"),
            "b-node2": state("b-node2", swarm_node=2, swarm_supervisor=700),
            "c-other": state("c-other", swarm_node=1, swarm_supervisor=800),
            "d-node1": state("d-node1", swarm_node=1, swarm_supervisor=700),
        }
    )
    rows = views(data).processes().data["processes"]
    assert [(r["id"], r["swarm"]) for r in rows] == [
        ("a-alone", None),
        ("d-node1", "supervisor 700 · node 01"),
        ("b-node2", "supervisor 700 · node 02"),
        ("c-other", "supervisor 800 · node 01"),
    ]
    assert views(data).process("b-node2").data["process"]["swarm"] == "supervisor 700 · node 02"


def test_processes_are_paginated() -> None:
    data = FakeData(states={f"p{n:03}": state(f"p{n:03}") for n in range(PER_PAGE + 3)})
    page = views(data).processes(page=2)
    assert [r["id"] for r in page.data["processes"]] == [
        f"p{n:03}" for n in range(PER_PAGE, PER_PAGE + 3)
    ]
    assert page.data["paging"] == {"page": 2, "pages": 2, "total": PER_PAGE + 3}


def test_a_process_page_shows_its_state() -> None:
    data = FakeData(
        states={
            "p1": state("p1", partitions=[partition("orders", 0)], jobs=[job("orders", 0, NOW - 4)])
        }
    )
    page = views(data).process("p1")
    assert page.title == "Process p1"
    assert page.data["process"]["status"] == "running"
    assert page.data["partitions"] == [partition("orders", 0)]
    assert page.data["jobs"][0]["running_for"] == 4.0
    assert page.data["counters"] == {"processed": 10}


def test_a_process_page_lists_its_latency_stages_in_the_order_a_message_passes_them() -> None:
    measured = state("p1")
    summary = {"count": 3, "mean": 0.001, "p50": 0.001, "p90": 0.002, "p99": 0.003, "max": 0.004}
    measured["latency"] = {
        "payments": {"start→end": summary},
        "orders": {"produce→end": summary, "poll→start": summary, "unknown": summary},
    }
    rows = views(FakeData(states={"p1": measured})).process("p1").data["latency"]
    assert [(row["topic"], row["stage"]) for row in rows] == [
        ("orders", "poll→start"),
        ("orders", "produce→end"),
        ("payments", "start→end"),
    ]
    assert rows[0]["p99"] == 0.003
    assert views(FakeData(states={"p1": state("p1")})).process("p1").data["latency"] == []


def test_an_unknown_process_is_not_found() -> None:
    with pytest.raises(NotFound) as raised:
        views(FakeData(states={"p1": state("p1")})).process("unknown")
    assert raised.value.kind == "process"
    assert raised.value.name == "unknown"
    assert "unknown" in str(raised.value)


# -- errors -----------------------------------------------------------------------------------


def errors_data() -> FakeData:
    return FakeData(
        errors=[
            error("0-1", kind="consumer.consume.error", topic="orders", process="p1"),
            error("0-2", kind="consumer.consume.error", topic="payments", process="p1"),
            error("0-3", kind="consumer.poll.error", topic="orders", process="p2"),
            error("0-4", topic="orders", process="p2", exc=KeyError("customer_id")),
            error("0-5", topic="orders", process="p2", exc=RuntimeError("Timed out")),
        ]
    )


def ids(page: Any) -> list[str]:
    return [e["id"] for e in page.data["errors"]]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["0-1", "0-2", "0-3", "0-4", "0-5"]),
        ({"type": "consumer.poll.error"}, ["0-3"]),
        ({"topic": "payments"}, ["0-2"]),
        ({"process": "p2"}, ["0-3", "0-4", "0-5"]),
        ({"topic": "orders", "process": "p1"}, ["0-1"]),
        ({"q": "keyerror"}, ["0-4"]),
        ({"q": "TIMED OUT"}, ["0-5"]),
        ({"q": "bad payload", "topic": "orders"}, ["0-1", "0-3"]),
        ({"type": "", "topic": "", "q": ""}, ["0-1", "0-2", "0-3", "0-4", "0-5"]),
        ({"topic": "nowhere"}, []),
    ],
)
def test_errors_are_filtered(filters: dict[str, str], expected: list[str]) -> None:
    page = views(errors_data()).errors(filters)
    assert ids(page) == expected
    assert page.data["paging"]["total"] == len(expected)
    assert page.data["filters"] == filters


def test_error_rows_are_brief_and_filter_options_list_every_value() -> None:
    page = views(errors_data()).errors({"topic": "payments"})
    (row,) = page.data["errors"]
    assert "traceback" not in row
    assert row["error_class"] == "ValueError"
    assert row["message"] == "bad payload"
    assert row["consumer"] == "Orders"
    assert row["offset"] == 5
    assert page.data["options"] == {
        "type": ["consumer.consume.error", "consumer.poll.error"],
        "topic": ["orders", "payments"],
        "process": ["p1", "p2"],
    }


def test_errors_are_paginated() -> None:
    data = FakeData(errors=[error(f"0-{n}") for n in range(2 * PER_PAGE + 1)])
    first = views(data).errors({}, page=1)
    last = views(data).errors({}, page=3)
    beyond = views(data).errors({}, page=99)
    assert ids(first) == [f"0-{n}" for n in range(PER_PAGE)]
    assert first.data["paging"] == {"page": 1, "pages": 3, "total": 2 * PER_PAGE + 1}
    assert ids(last) == [f"0-{2 * PER_PAGE}"]
    assert beyond.data["paging"]["page"] == 3
    assert ids(views(data).errors({}, page=0)) == ids(first)


def test_an_error_is_found_by_id() -> None:
    page = views(errors_data()).error("0-4")
    assert page.data["error"]["error_class"] == "KeyError"
    assert page.data["error"]["traceback"].startswith("KeyError: 'customer_id'")
    assert page.title == "Error 0-4"


def test_an_unknown_error_is_not_found() -> None:
    with pytest.raises(NotFound) as raised:
        views(errors_data()).error("nope")
    assert raised.value.kind == "error"


# -- batches ----------------------------------------------------------------------------------


def test_batches_lists_the_running_batches_of_live_processes_only() -> None:
    data = FakeData(
        states={
            "p1": state(
                "p1",
                partitions=[partition("orders", 0, "Orders"), partition("orders", 1, "Other")],
                jobs=[job("orders", 0, NOW - 2), job("orders", 1, NOW - 30)],
            ),
            "p2": state(
                "p2", partitions=[partition("payments", 0)], jobs=[job("payments", 0, NOW - 5)]
            ),
            "dead": state("dead", reported_at=NOW - 60, jobs=[job("orders", 3, NOW - 100)]),
            "stopped": state("stopped", status="stopped", jobs=[job("orders", 4, NOW - 100)]),
        }
    )
    running = views(data).batches().data["running"]
    assert [(j["process"], j["topic"], j["partition"]) for j in running] == [
        ("p1", "orders", 1),
        ("p2", "payments", 0),
        ("p1", "orders", 0),
    ]
    assert [j["running_for"] for j in running] == [30.0, 5.0, 2.0]
    assert [j["consumer"] for j in running] == ["Other", "Orders", "Orders"]


def test_batches_sorts_the_slowest_by_duration_across_processes() -> None:
    def done(duration: float) -> dict[str, Any]:
        return {"topic": "orders", "partition": 0, "duration": duration, "finished_at": NOW - 1}

    data = FakeData(
        states={
            "p1": state("p1", slowest=[done(1.0), done(7.5)]),
            "p2": state("p2", slowest=[done(3.0)]),
            "dead": state("dead", reported_at=NOW - 60, slowest=[done(5.0)]),
        }
    )
    slowest = views(data).batches().data["slowest"]
    assert [(j["process"], j["duration"]) for j in slowest] == [
        ("p1", 7.5),
        ("dead", 5.0),
        ("p2", 3.0),
        ("p1", 1.0),
    ]


def test_batches_keeps_the_twenty_slowest() -> None:
    many = [{"duration": float(n), "finished_at": NOW} for n in range(30)]
    slowest = views(FakeData(states={"p1": state("p1", slowest=many)})).batches().data["slowest"]
    assert [j["duration"] for j in slowest] == [float(n) for n in range(29, 9, -1)]


# -- dashboard --------------------------------------------------------------------------------


def minute_series() -> dict[str, Any]:
    return {
        "resolution": "minute",
        "seconds": 60,
        "points": [
            # older than the hour the dashboard shows by default
            {"t": NOW - 7200, "messages": 999, "errors": 0, "lag": {"orders": 1}},
            {
                "t": NOW - 120,
                "messages": 600,
                "errors": 6,
                "lag": {"orders": 10, "payments": 5},
                "utilization": 0.25,
                "rss": 3 * 2**20,
                "processes": 2,
            },
            # the newest bucket, 30 s of it passed
            {"t": NOW - 30, "messages": 90, "errors": 0, "lag": {}, "utilization": 0.5, "rss": 0},
        ],
    }


def test_dashboard_counts_live_and_dead_processes() -> None:
    data = FakeData(
        states={
            "p1": state(
                "p1",
                partitions=[partition("orders", 0), partition("orders", 1)],
                jobs=[job("orders", 0, NOW - 1)],
                messages_per_second=10.5,
                lag=7,
            ),
            "p2": state(
                "p2", partitions=[partition("payments", 0)], messages_per_second=2.25, lag=3
            ),
            "dead": state("dead", reported_at=NOW - 600, partitions=[partition("x", 0)], lag=100),
            "stopped": state("stopped", status="stopped", messages_per_second=99.0),
        },
        errors=[
            error("0-1", at=NOW - 10),
            error("0-2", at=NOW - 3599),
            error("0-3", at=NOW - 3601),
        ],
    )
    counts = views(data).dashboard().data["counts"]
    assert counts == {
        "processes": 2,
        "dead": 1,
        "partitions": 3,
        "jobs": 1,
        "errors_last_hour": 2,
        "messages_per_second": 12.75,
        "lag": 10,
    }


def test_dashboard_charts_come_from_the_minute_series() -> None:
    page = views(FakeData(series={"minute": minute_series()})).dashboard("1h")
    assert page.data["resolution"] == "minute"
    assert page.data["bucket_seconds"] == 60
    charts = page.data["charts"]
    assert charts["throughput"] == [(NOW - 120, 10.0), (NOW - 30, 3.0)]
    assert charts["errors"] == [(NOW - 120, 0.1), (NOW - 30, 0.0)]
    assert charts["lag"] == [(NOW - 120, 15.0), (NOW - 30, 0.0)]
    assert charts["utilization"] == [(NOW - 120, 25.0), (NOW - 30, 50.0)]
    assert charts["rss"] == [(NOW - 120, 3.0), (NOW - 30, 0.0)]


def test_dashboard_without_series_has_empty_charts() -> None:
    page = views(FakeData()).dashboard()
    assert all(points == [] for points in page.data["charts"].values())
    assert page.data["counts"]["processes"] == 0


@pytest.mark.parametrize(
    ("range_", "resolution"),
    [("1h", "minute"), ("24h", "ten_minutes"), ("7d", "hour"), ("forever", "minute")],
)
def test_dashboard_ranges_read_their_series(range_: str, resolution: str) -> None:
    page = views(FakeData()).dashboard(range_)
    assert page.data["resolution"] == resolution
    assert page.data["range"] == (range_ if range_ != "forever" else "1h")


# -- routing ----------------------------------------------------------------------------------


def test_routing_lists_the_apps_routes() -> None:
    the_app = app()
    the_app.routes.topic("orders", Orders)
    page = views(FakeData(), the_app).routing()
    assert page.data["client_id"] == "t"
    assert page.data["bootstrap"] == "127.0.0.1:9"
    (group,) = page.data["groups"].values()
    (route,) = group
    assert route["topic"] == "orders"
    assert route["consumer"] == "Orders"
    assert route["active"] is True
    assert route["dead_letter_queue"] is None
    assert route["max_messages"] == the_app.settings.max_messages
    assert route["initial_offset"] == "earliest"


def test_routing_shows_a_dead_letter_queue() -> None:
    the_app = app()
    the_app.routes.topic(
        "orders", Orders, dead_letter_queue={"topic": "orders_dlq", "max_retries": 2}
    )
    the_app.routes.topic("payments", Orders)
    page = views(FakeData(), the_app).routing()
    routes = {r["topic"]: r for group in page.data["groups"].values() for r in group}
    assert set(routes) == {"orders", "payments"}
    assert routes["orders"]["dead_letter_queue"] == "orders_dlq"
    assert routes["orders"]["max_retries"] == 2


class TopicsAdmin:
    """The admin calls of the topics page: ``orders`` reads, ``slow`` times out, ``gone`` was
    deleted after it was listed (as another process's topics are, any time)."""

    def list_topics(self, internal: bool = False) -> list[str]:
        return ["gone", "orders", "slow"]

    def topic_info(self, name: str) -> Any:
        if name == "gone":
            raise KafkaError("topic gone does not exist", name="UNKNOWN_TOPIC_OR_PART")
        return TopicInfo(name, (PartitionInfo(0, 1, (1,), (1,)),))

    def read_watermark_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        if topic == "slow":
            raise KafkaError(f"watermarks of {topic}/{partition}: timed out", name="_TIMED_OUT")
        return 2, 7


def test_a_topic_deleted_or_unread_leaves_the_rest_of_the_topics_page() -> None:
    page = views(FakeData())
    page._admin = cast(Any, TopicsAdmin())
    rows = {row["name"]: row for row in page.topics().data["topics"]}
    assert set(rows) == {"orders", "slow"}, "a topic deleted since the listing is left out"
    assert rows["orders"]["messages"] == 5
    assert rows["orders"]["unread"] is None
    assert rows["slow"]["messages"] is None
    assert "timed out" in rows["slow"]["unread"]
    html = rendering.environment().get_template("topics.html").render(
        base="", title="t", client_id="t", active="", csrf_field="c", csrf_token="t", user=None,
        login=False, read_only=False, request=None, can=lambda *a: True,
        **page.topics().data,
    )  # fmt: skip
    assert 'title="not read: watermarks of slow/0: timed out"' in html
