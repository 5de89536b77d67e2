"""Folding reports: rates from counter differences, series buckets, gauges of live processes,
idempotence, forgetting and restoring."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from conveyor.serialization import json_dumps, json_loads
from conveyor.web.aggregation.fold import RESOLUTIONS, Aggregate, process_status
from conveyor.web.reports import parse_report

T0 = 1_000_000.0
MINUTE = 999_960  # floor(T0 / 60) * 60


def part(topic: str, partition: int, lag: int | None, group: str = "shop") -> dict[str, Any]:
    return {
        "listener": topic,
        "consumer_group": group,
        "topic": topic,
        "partition": partition,
        "consumer": "Orders",
        "committed": 0,
        "marked": None,
        "high_watermark": None,
        "lag": lag,
        "pending": 0,
        "paused": False,
        "retrying": False,
        "attempt": 0,
    }


def report(
    pid: str = "p1",
    *,
    seq: int = 1,
    at: float = T0,
    processed: int = 0,
    errors: int = 0,
    busy: float = 0.0,
    size: int = 2,
    utilization: float = 0.0,
    interval: float = 5.0,
    state: str = "running",
    rss: int = 1000,
    partitions: Sequence[dict[str, Any]] = (),
    jobs: Sequence[dict[str, Any]] = (),
    slowest: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A report as the aggregator gets it: checked by parse_report after JSON."""
    document = {
        "schema": 1,
        "id": pid,
        "client_id": "shop",
        "seq": seq,
        "at": at,
        "interval": interval,
        "process": {
            "pid": 1,
            "hostname": "box",
            "started_at": T0 - 100,
            "state": state,
            "rss": rss,
            "cpu": 0.1,
            "cpu_seconds": 1.0,
            "threads": 5,
            "swarm_node": 2,
            "swarm_supervisor": 700,
        },
        "counters": {"processed": processed, "batches": 0, "errors": errors, "busy_seconds": busy},
        "pool": {
            "size": size,
            "busy": 0,
            "queued": 0,
            "busy_seconds": busy,
            "utilization": utilization,
        },
        "listeners": [],
        "partitions": list(partitions),
        "jobs": list(jobs),
        "slowest": list(slowest),
    }
    return parse_report(json_dumps(document))


def bucket(at: float, seconds: int) -> int:
    return int(at // seconds) * seconds


def messages(aggregate: Aggregate, name: str) -> dict[int, int]:
    return {t: point["messages"] for t, point in aggregate.series[name].items()}


# -- folding ----------------------------------------------------------------------------------


def test_the_first_report_creates_the_state() -> None:
    aggregate = Aggregate()
    folded = aggregate.fold(
        report(seq=3, processed=40, utilization=0.25, partitions=[part("orders", 0, 7)]),
        received_at=T0 + 0.5,
    )
    assert folded is True
    state = aggregate.states["p1"]
    assert state["seq"] == 3
    assert state["reported_at"] == T0
    assert state["received_at"] == T0 + 0.5
    assert state["hostname"] == "box"
    assert (state["swarm_node"], state["swarm_supervisor"]) == (2, 700)
    assert state["client_id"] == "shop"
    assert state["interval"] == 5.0
    assert state["lag"] == 7
    assert state["rss"] == 1000
    # nothing to difference yet: no rates, utilization as the process saw it
    assert state["messages_per_second"] == 0.0
    assert state["errors_per_second"] == 0.0
    assert state["utilization"] == 0.25
    assert aggregate.folded == 1
    assert aggregate.changed == {"p1"}


def test_a_report_not_newer_is_ignored() -> None:
    aggregate = Aggregate()
    assert aggregate.fold(report(seq=2, processed=100), T0)
    states, series = copy.deepcopy(aggregate.states), copy.deepcopy(aggregate.series)
    aggregate.take_changes()

    assert aggregate.fold(report(seq=2, at=T0 + 5, processed=200), T0 + 5) is False
    assert aggregate.fold(report(seq=1, at=T0 + 10, processed=300), T0 + 10) is False

    assert aggregate.states == states
    assert aggregate.series == series
    assert aggregate.folded == 1
    assert aggregate.take_changes() == {}


def test_folding_the_same_reports_twice_is_idempotent() -> None:
    aggregate = Aggregate()
    reports = [report(seq=n, at=T0 + 5 * n, processed=100 * n) for n in range(1, 6)]
    for each in reports:
        aggregate.fold(each, each["at"])
    once = {name: messages(aggregate, name) for name in aggregate.series}
    for each in reports:
        assert aggregate.fold(each, each["at"] + 100) is False
    assert {name: messages(aggregate, name) for name in aggregate.series} == once
    assert sum(once["minute"].values()) == 500


def test_rates_come_from_two_reports_counters() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=T0, processed=0, errors=0, busy=0.0, size=2), T0)
    aggregate.fold(report(seq=2, at=T0 + 5, processed=500, errors=10, busy=5.0, size=2), T0 + 5)
    state = aggregate.states["p1"]
    assert state["messages_per_second"] == 100.0
    assert state["errors_per_second"] == 2.0
    assert state["utilization"] == 0.5


def test_utilization_is_at_most_one() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=T0, busy=0.0, size=1), T0)
    aggregate.fold(report(seq=2, at=T0 + 5, busy=50.0, size=1), T0 + 5)
    assert aggregate.states["p1"]["utilization"] == 1.0


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            {"processed": 1000, "errors": 10, "busy": 50.0},
            {"processed": 200, "errors": 1, "busy": 1.0},
        ),
        (
            {"processed": 100, "errors": 10, "busy": 50.0},
            {"processed": 100, "errors": 1, "busy": 1.0},
        ),
    ],
    ids=["restarted", "only-errors-and-busy-back"],
)
def test_counters_going_backwards_give_no_negative_rates(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=T0, **before), T0)
    aggregate.fold(report(seq=2, at=T0 + 5, **after), T0 + 5)
    state = aggregate.states["p1"]
    assert state["messages_per_second"] >= 0
    assert state["errors_per_second"] >= 0
    assert 0 <= state["utilization"] <= 1
    for name in aggregate.series:
        for point in aggregate.series[name].values():
            assert point["messages"] >= 0
            assert point["errors"] >= 0


def test_a_restart_counts_the_new_totals_from_zero() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=T0, processed=1000), T0)
    aggregate.fold(report(seq=2, at=T0 + 5, processed=200), T0 + 5)
    assert aggregate.states["p1"]["messages_per_second"] == 40.0
    assert sum(messages(aggregate, "minute").values()) == 1200


# -- series -----------------------------------------------------------------------------------


def test_bucket_starts() -> None:
    assert bucket(T0, 60) == MINUTE
    assert bucket(T0, 600) == 999_600
    assert bucket(T0, 3600) == 997_200


def test_messages_land_in_their_bucket_and_add_up_to_the_total() -> None:
    aggregate = Aggregate()
    totals = [0, 30, 70, 150, 160, 400, 1000]
    times = [T0 + 5 * n for n in range(len(totals))]
    times[-1] = T0 + 700  # the last one in another ten-minute bucket
    for n, (at, total) in enumerate(zip(times, totals, strict=True), start=1):
        aggregate.fold(report(seq=n, at=at, processed=total), at)

    expected_minute: dict[int, int] = {}
    previous = 0
    for at, total in zip(times, totals, strict=True):
        start = bucket(at, 60)
        expected_minute[start] = expected_minute.get(start, 0) + total - previous
        previous = total
    assert messages(aggregate, "minute") == expected_minute
    assert messages(aggregate, "minute") == {MINUTE: 150, MINUTE + 60: 250, MINUTE + 720: 600}
    assert messages(aggregate, "ten_minutes") == {999_600: 400, 1_000_200: 600}
    assert messages(aggregate, "hour") == {997_200: 1000}
    for resolution in RESOLUTIONS:
        points = aggregate.series[resolution.name]
        assert sum(p["messages"] for p in points.values()) == totals[-1]
        assert all(t == p["t"] and t % resolution.seconds == 0 for t, p in points.items())


def test_errors_are_counted_in_the_bucket() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=T0, errors=2), T0)
    aggregate.fold(report(seq=2, at=T0 + 60, errors=7), T0 + 60)
    errors = {t: p["errors"] for t, p in aggregate.series["minute"].items()}
    assert errors == {MINUTE: 2, MINUTE + 60: 5}


def test_buckets_older_than_the_span_are_trimmed() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=MINUTE + 1.0, processed=10), MINUTE + 1.0)
    # 59 minutes later: 60 buckets, the first still kept
    aggregate.fold(report(seq=2, at=MINUTE + 3540 + 1.0, processed=20), MINUTE + 3541.0)
    assert MINUTE in aggregate.series["minute"]
    # an hour later: the first bucket is past the span
    aggregate.fold(report(seq=3, at=MINUTE + 3600 + 1.0, processed=30), MINUTE + 3601.0)
    minute = aggregate.series["minute"]
    assert MINUTE not in minute
    assert sorted(minute) == [MINUTE + 3540, MINUTE + 3600]
    assert len(minute) <= RESOLUTIONS[0].count
    # the coarser series keep theirs
    assert bucket(MINUTE + 1.0, 600) in aggregate.series["ten_minutes"]
    assert bucket(MINUTE + 1.0, 3600) in aggregate.series["hour"]


def test_a_week_of_hourly_reports_keeps_at_most_count_buckets() -> None:
    aggregate = Aggregate()
    for n in range(400):
        at = T0 + 1800 * n
        aggregate.fold(report(seq=n + 1, at=at, processed=n), at)
    for resolution in RESOLUTIONS:
        points = aggregate.series[resolution.name]
        assert len(points) <= resolution.count
        newest = max(points)
        assert min(points) > newest - resolution.span


# -- gauges -----------------------------------------------------------------------------------


def test_lag_is_summed_per_topic_over_partitions() -> None:
    aggregate = Aggregate()
    aggregate.fold(
        report(
            "p1",
            partitions=[part("orders", 0, 5), part("orders", 1, 7), part("payments", 0, 3)],
        ),
        T0,
    )
    aggregate.fold(report("p2", partitions=[part("orders", 2, 11), part("payments", 1, None)]), T0)
    assert aggregate.gauges(T0)["lag"] == {"orders": 23, "payments": 3}
    assert aggregate.series["minute"][MINUTE]["lag"] == {"orders": 23, "payments": 3}


@pytest.mark.parametrize("newest_first", [False, True], ids=["in-order", "newest-folded-first"])
def test_a_partition_reported_by_two_processes_counts_once_the_newest(newest_first: bool) -> None:
    # after a rebalance the partition's old owner still lists it until its next report
    reports = [
        report("old", at=T0, partitions=[part("orders", 0, 100), part("orders", 1, 1)]),
        report("new", at=T0 + 2, partitions=[part("orders", 0, 4)]),
    ]
    if newest_first:
        reports.reverse()
    aggregate = Aggregate()
    for each in reports:
        aggregate.fold(each, each["at"])
    assert aggregate.gauges(T0 + 2)["lag"] == {"orders": 5}


def test_the_same_partition_in_two_consumer_groups_counts_twice() -> None:
    aggregate = Aggregate()
    aggregate.fold(report("a", partitions=[part("orders", 0, 5, group="shop")]), T0)
    aggregate.fold(report("b", partitions=[part("orders", 0, 6, group="audit")]), T0)
    assert aggregate.gauges(T0)["lag"] == {"orders": 11}


def test_a_dead_process_is_left_out_of_the_gauges() -> None:
    aggregate = Aggregate()
    aggregate.fold(report("gone", at=T0, rss=500, partitions=[part("orders", 0, 100)]), T0)
    alive_at = T0 + 16  # more than 3 intervals of 5 s after "gone" reported
    aggregate.fold(
        report("alive", at=alive_at, rss=70, partitions=[part("orders", 1, 4)]), alive_at
    )
    gauges = aggregate.gauges(alive_at)
    assert gauges == {"lag": {"orders": 4}, "utilization": 0.0, "rss": 70, "processes": 1}
    assert aggregate.series["minute"][MINUTE]["processes"] == 1
    # while both are live, both count
    assert aggregate.gauges(T0 + 15)["processes"] == 2
    assert aggregate.gauges(T0 + 15)["rss"] == 570


def test_a_stopped_process_is_left_out_of_the_gauges() -> None:
    aggregate = Aggregate()
    aggregate.fold(report("p1", state="stopped", partitions=[part("orders", 0, 100)]), T0)
    aggregate.fold(report("p2", partitions=[part("orders", 1, 1)]), T0)
    gauges = aggregate.gauges(T0)
    assert gauges["processes"] == 1
    assert gauges["lag"] == {"orders": 1}


def test_utilization_gauge_is_the_mean_of_live_processes() -> None:
    aggregate = Aggregate()
    aggregate.fold(report("a", utilization=0.2), T0)
    aggregate.fold(report("b", utilization=0.6), T0)
    assert aggregate.gauges(T0)["utilization"] == 0.4
    assert Aggregate().gauges(T0) == {"lag": {}, "utilization": 0.0, "rss": 0, "processes": 0}


# -- status and forgetting --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "silent_for", "status"),
    [
        ("running", 0.0, "running"),
        ("running", 15.0, "running"),
        ("running", 15.1, "dead"),
        ("quiet", 1.0, "quiet"),
        ("stopping", 1.0, "stopping"),
        ("stopped", 1.0, "stopped"),
        ("stopped", 1000.0, "stopped"),
    ],
)
def test_process_status(state: str, silent_for: float, status: str) -> None:
    reported = {"state": state, "interval": 5.0, "reported_at": T0}
    assert process_status(reported, T0 + silent_for) == status


def test_process_status_of_a_folded_state() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(interval=2.0), T0)
    assert process_status(aggregate.states["p1"], T0 + 6) == "running"
    assert process_status(aggregate.states["p1"], T0 + 6.5) == "dead"


def test_forget_drops_silent_processes_and_publishes_them_as_none() -> None:
    aggregate = Aggregate(forget_after=600)
    aggregate.fold(report("old", at=T0), T0)
    aggregate.fold(report("recent", at=T0 + 500), T0 + 500)
    aggregate.take_changes()

    assert aggregate.forget(T0 + 600) == []
    assert aggregate.forget(T0 + 601) == ["old"]
    assert set(aggregate.states) == {"recent"}
    assert aggregate.take_changes() == {"old": None}
    assert aggregate.take_changes() == {}


def test_take_changes_holds_the_newest_states() -> None:
    aggregate = Aggregate()
    aggregate.fold(report("a", seq=1), T0)
    aggregate.fold(report("a", seq=2, at=T0 + 5), T0 + 5)
    aggregate.fold(report("b"), T0)
    changes = aggregate.take_changes()
    assert set(changes) == {"a", "b"}
    assert changes["a"] is not None
    assert changes["a"]["seq"] == 2


def test_the_slowest_jobs_of_the_last_hour_are_kept() -> None:
    def job(duration: float, finished_at: float) -> dict[str, Any]:
        return {"topic": "orders", "partition": 0, "duration": duration, "finished_at": finished_at}

    aggregate = Aggregate()
    aggregate.fold(report(seq=1, slowest=[job(9.0, T0 - 4000), job(1.0, T0)]), T0)
    aggregate.fold(report(seq=2, at=T0 + 5, slowest=[job(3.0, T0 + 5)]), T0 + 5)
    later = [job(float(d), T0 + 10) for d in range(10, 20)]
    assert [j["duration"] for j in aggregate.states["p1"]["slowest"]] == [3.0, 1.0]
    aggregate.fold(report(seq=3, at=T0 + 10, slowest=later), T0 + 10)
    durations = [j["duration"] for j in aggregate.states["p1"]["slowest"]]
    assert durations == [float(d) for d in range(19, 9, -1)]


# -- restoring --------------------------------------------------------------------------------


def test_states_and_series_survive_a_restart() -> None:
    first = Aggregate()
    reports = [
        report("p1", seq=1, at=T0, processed=0, partitions=[part("orders", 0, 3)]),
        report("p2", seq=1, at=T0 + 1, processed=40),
        report("p1", seq=2, at=T0 + 65, processed=500, busy=5.0),
    ]
    for each in reports:
        first.fold(each, each["at"])
    published = json_dumps(
        {
            "states": first.take_changes(),
            "series": [first.series_document(r.name) for r in RESOLUTIONS],
        }
    )

    restored = Aggregate()
    document = json_loads(published)
    for pid, state in document["states"].items():
        restored.load_state(pid, state)
    for series in document["series"]:
        restored.load_series(series)

    assert restored.states == first.states
    assert restored.series == first.series
    # the reports read again after the restart change nothing
    for each in reports:
        assert restored.fold(each, each["at"] + 1000) is False
    assert restored.series == first.series
    # and the next one is differenced against the restored totals
    assert restored.fold(report("p1", seq=3, at=T0 + 70, processed=600), T0 + 70)
    assert restored.states["p1"]["messages_per_second"] == 20.0
    assert sum(messages(restored, "minute").values()) == 640


def test_series_document_lists_points_in_time_order() -> None:
    aggregate = Aggregate()
    aggregate.fold(report(seq=1, at=T0 + 120, processed=1), T0)
    aggregate.fold(report(seq=2, at=T0, processed=2), T0)  # an older time with a newer seq
    document = aggregate.series_document("minute")
    assert document["resolution"] == "minute"
    assert document["seconds"] == 60
    assert [p["t"] for p in document["points"]] == [MINUTE, MINUTE + 120]


def test_loading_a_forgotten_state_drops_it() -> None:
    aggregate = Aggregate()
    aggregate.fold(report("p1"), T0)
    aggregate.load_state("p1", None)
    aggregate.load_state("never", None)
    assert aggregate.states == {}


def test_a_series_of_an_unknown_resolution_is_ignored() -> None:
    aggregate = Aggregate()
    aggregate.load_series({"resolution": "fortnight", "points": [{"t": 0, "messages": 1}]})
    aggregate.load_series({"points": [{"t": 0, "messages": 1}]})
    assert aggregate.series == {r.name: {} for r in RESOLUTIONS}
