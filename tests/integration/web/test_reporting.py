"""Reporting and aggregation against the real broker: reports flow and fold, a killed process
shows as dead, lag rises and falls (in the chart's series too), a consumer's exception shows
with its traceback, and a malformed report is counted and skipped."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from conveyor import App, Consumer, Producer
from conveyor.web import WebTopics
from conveyor.web.aggregation.fold import process_status
from conveyor.web.reading.data import WebData
from helpers import running

HERE = Path(__file__).parent


def web_app(
    bootstrap: str, topic: str, topics: WebTopics, consumer: type[Consumer], group: str
) -> App:
    app = App(
        client_id="webtest",
        kafka={"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6_000},
        concurrency=2,
        max_wait_time=0.2,
        pause_timeout=0.2,
    )
    app.routes.topic(topic, consumer)
    app.web.enable(tracking_interval=0.5, topics=topics)
    return app


@contextmanager
def ui(app: App) -> Iterator[tuple[TestClient, WebData]]:
    """The app's web UI (its pages, through Starlette's test client) and the data it reads."""
    client = TestClient(app.web.asgi())
    try:
        yield client, app.web.data
    finally:
        client.close()
        app.web.data.stop()


def live(data: WebData, client_id: str) -> list[dict]:
    now = data.now
    return [
        s
        for s in data.states().values()
        if s["client_id"] == client_id and process_status(s, now) == "running"
    ]


def test_a_process_appears_and_shows_as_dead_after_it_is_killed(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics
) -> None:
    topic = new_topic(partitions=2)
    env = dict(
        os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, TOPIC=topic, GROUP=f"g-{topic}",
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"), AGGREGATE="0",
        PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "server", "--app", "web_app:app", "--log-level", "WARNING"],
        cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # this side aggregates (the killed process must not take the aggregator with it)
    viewer = web_app(kafka_bootstrap, topic, web_topics, Consumer, f"viewer-{topic}")
    aggregator = viewer.web.new_aggregator()
    aggregator.start()
    try:
        with ui(viewer) as (client, data):
            assert data.wait_for(lambda d: any(s["pid"] == server.pid and process_status(s, d.now) == "running"
                                                and len(s["partitions"]) == 2 for s in d.states().values()), 60)  # fmt: skip
            [state] = [s for s in data.states().values() if s["pid"] == server.pid]
            assert state["client_id"] == "webshop"
            assert {p["topic"] for p in state["partitions"]} == {topic}
            page = client.get("/api/processes").json()
            assert [p["status"] for p in page["processes"] if p["pid"] == server.pid] == ["running"]
            assert client.get(f"/processes/{state['id']}").status_code == 200

            server.send_signal(signal.SIGKILL)
            server.wait(30)
            assert data.wait_for(
                lambda d: process_status(d.states()[state["id"]], d.now) == "dead", 30
            )
            page = client.get("/api/processes").json()
            assert [p["status"] for p in page["processes"] if p["pid"] == server.pid] == ["dead"]
            assert client.get("/api/dashboard").json()["counts"]["dead"] >= 1
    finally:
        if server.poll() is None:
            server.kill()
        aggregator.stop()
        viewer.producer.close(5)


def test_lag_appears_on_a_topic_and_falls_as_the_consumer_catches_up(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics
) -> None:
    topic = new_topic()
    gate = threading.Event()
    started = threading.Event()

    class Gated(Consumer):
        def consume(self) -> None:
            started.set()
            gate.wait(60)

    app = web_app(kafka_bootstrap, topic, web_topics, Gated, f"g-{topic}")
    with (
        running(app),
        ui(app) as (client, data),
        Producer({"bootstrap.servers": kafka_bootstrap}) as producer,
    ):
        producer.produce_sync(topic=topic, payload="first")
        assert started.wait(30)
        producer.produce_many_sync([{"topic": topic, "payload": str(i)} for i in range(40)])

        def series_lag(d: WebData) -> int:
            points = (d.series("minute") or {}).get("points", [])
            return int(points[-1]["lag"].get(topic, 0)) if points else 0

        assert data.wait_for(lambda d: series_lag(d) >= 40, 30)
        assert data.wait_for(lambda d: any(s["lag"] >= 40 for s in live(d, "webtest")), 30)
        lags = client.get("/api/lags").json()
        [row] = [t for t in lags["topics"] if t["topic"] == topic]
        assert row["lag"] >= 40  # from Kafka: nothing committed yet
        assert row["age"] is not None
        assert row["age"] >= 0
        chart = client.get("/api/lags").json()["charts"][topic]
        assert max(value for _, value in chart) >= 40

        gate.set()
        assert data.wait_for(lambda d: series_lag(d) == 0, 30)
        assert data.wait_for(lambda d: all(s["lag"] == 0 for s in live(d, "webtest")), 30)
        points = data.series("minute")["points"]  # type: ignore[index]
        assert points[-1]["messages"] >= 41 or sum(p["messages"] for p in points) >= 41


def test_an_exception_in_a_consumer_shows_on_the_errors_page_with_its_traceback(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics
) -> None:
    topic = new_topic()
    failed = threading.Event()

    class Picky(Consumer):
        def consume(self) -> None:
            if not failed.is_set():
                failed.set()
                refuse_the_order()

    def refuse_the_order() -> None:
        raise ValueError("order 7 has no customer")

    app = web_app(kafka_bootstrap, topic, web_topics, Picky, f"g-{topic}")
    with (
        running(app),
        ui(app) as (client, data),
        Producer({"bootstrap.servers": kafka_bootstrap}) as producer,
    ):
        producer.produce_sync(topic=topic, payload="order 7")
        assert data.wait_for(lambda d: any(e["topic"] == topic for e in d.errors()), 30)
        listing = client.get("/api/errors", params={"topic": topic}).json()
        [error] = listing["errors"]
        assert (error["type"], error["error_class"], error["message"]) == (
            "consumer.consume.error", "ValueError", "order 7 has no customer")  # fmt: skip
        assert (error["partition"], error["offset"], error["consumer"]) == (0, 0, "Picky")
        detail = client.get(f"/api/errors/{error['id']}").json()["error"]
        assert "refuse_the_order" in detail["traceback"]
        assert 'raise ValueError("order 7 has no customer")' in detail["traceback"]
        html = client.get(f"/errors/{error['id']}").text
        assert "refuse_the_order" in html
        assert "ValueError" in html
        assert client.get("/api/errors", params={"q": "no customer"}).json()["paging"]["total"] >= 1
        assert client.get("/api/errors", params={"q": "nothing like it"}).json()["errors"] == []


def test_a_malformed_report_is_counted_and_skipped_with_one_log_line(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic()
    app = web_app(kafka_bootstrap, topic, web_topics, Consumer, f"g-{topic}")
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(topic=web_topics.reports, payload=b"{not json")
    aggregator = app.web.new_aggregator()
    caplog.set_level(logging.WARNING, logger="conveyor.web")
    aggregator.start()
    try:
        with ui(app) as (_client, data):
            # a good report after the bad one: folding goes on
            assert app.web.tracker is not None
            app.web.tracker.report()
            assert data.wait_for(lambda d: app.web.tracker.id in d.states(), 30)  # type: ignore[union-attr]
            assert data.wait_for(lambda d: (d.heartbeat() or {}).get("malformed") == 1, 30)
        assert aggregator.aggregate.malformed == 1
        assert aggregator.error is None
        assert aggregator._thread is not None
        assert aggregator._thread.is_alive()
        lines = [r for r in caplog.records if "malformed report" in r.getMessage()]
        assert len(lines) == 1
        assert "not JSON" in lines[0].getMessage()
    finally:
        aggregator.stop()
        app.producer.close(5)
