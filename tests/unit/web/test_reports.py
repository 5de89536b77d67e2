"""A process's report survives JSON and is accepted; anything else on the reports topic is
refused with the problem named, never folded."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from conveyor.processing.snapshot import (
    JobState,
    ListenerState,
    PartitionState,
    PoolState,
    ProcessState,
    Snapshot,
)
from conveyor.serialization import json_dumps
from conveyor.web.reports import (
    SCHEMA,
    MalformedReport,
    ProcessSampler,
    ProcessUsage,
    build_report,
    parse_report,
)

AT = 1_000_000.0


def snapshot() -> Snapshot:
    return Snapshot(
        taken_at=AT,
        process=ProcessState(pid=4242, hostname="box", started_at=AT - 60, state="running"),
        listeners=(
            ListenerState(
                name="orders",
                consumer_group="shop",
                topics=("orders",),
                state="running",
                last_poll_at=AT - 0.1,
                partitions=2,
            ),
        ),
        partitions=(
            PartitionState(
                listener="orders",
                consumer_group="shop",
                topic="orders",
                partition=0,
                consumer="Orders",
                committed=10,
                marked=12,
                high_watermark=20,
                lag=8,
                pending=3,
                paused=False,
                retrying=False,
                attempt=0,
            ),
            PartitionState(
                listener="orders",
                consumer_group="shop",
                topic="orders",
                partition=1,
                consumer=None,
                committed=None,
                marked=None,
                high_watermark=None,
                lag=None,
                pending=0,
                paused=True,
                retrying=True,
                attempt=2,
            ),
        ),
        jobs=(
            JobState(
                listener="orders",
                topic="orders",
                partition=0,
                first_offset=12,
                last_offset=14,
                count=3,
                started_at=AT - 1.5,
            ),
        ),
        pool=PoolState(size=4, busy=1, queued=0, busy_seconds=12.5, utilization=0.25),
    )


USAGE = ProcessUsage(rss=50 * 2**20, cpu=0.3, cpu_seconds=4.2, threads=9)
SLOWEST = [{"topic": "orders", "partition": 0, "duration": 2.5, "finished_at": AT - 10}]


def report(**changes: Any) -> dict[str, Any]:
    """A report as the tracker builds it, after a JSON round trip, with ``changes`` applied
    (a value of ``...`` drops the field)."""
    built = build_report(
        process_id="box:4242:ab12",
        client_id="shop",
        seq=7,
        interval=5.0,
        snapshot=snapshot(),
        usage=USAGE,
        counters={"processed": 500, "batches": 20, "errors": 1, "busy_seconds": 12.5},
        slowest=SLOWEST,
    )
    parsed = parse_report(json_dumps(built))
    for name, value in changes.items():
        if value is ...:
            del parsed[name]
        else:
            parsed[name] = value
    return parsed


def raw(document: Any) -> bytes:
    return json_dumps(document)


def refused(payload: bytes | None) -> str:
    with pytest.raises(MalformedReport) as raised:
        parse_report(payload)
    return str(raised.value)


# -- accepted ---------------------------------------------------------------------------------


def test_a_built_report_is_accepted_after_json() -> None:
    parsed = report()
    assert parsed["schema"] == SCHEMA
    assert parsed["id"] == "box:4242:ab12"
    assert parsed["client_id"] == "shop"
    assert parsed["seq"] == 7
    assert parsed["at"] == AT
    assert parsed["interval"] == 5.0
    assert parsed["counters"] == {
        "processed": 500,
        "batches": 20,
        "errors": 1,
        "busy_seconds": 12.5,
    }
    assert parsed["slowest"] == SLOWEST


def test_the_report_merges_the_snapshot_and_the_usage() -> None:
    parsed = report()
    assert parsed["process"] == {
        "pid": 4242,
        "hostname": "box",
        "started_at": AT - 60,
        "state": "running",
        "swarm_node": None,
        "swarm_supervisor": None,
        "rss": USAGE.rss,
        "cpu": USAGE.cpu,
        "cpu_seconds": USAGE.cpu_seconds,
        "threads": USAGE.threads,
    }
    assert parsed["pool"] == {
        "size": 4,
        "busy": 1,
        "queued": 0,
        "busy_seconds": 12.5,
        "utilization": 0.25,
    }
    assert [p["partition"] for p in parsed["partitions"]] == [0, 1]
    assert parsed["partitions"][0]["lag"] == 8
    assert parsed["partitions"][1]["lag"] is None
    assert parsed["listeners"][0]["topics"] == ["orders"]
    assert parsed["jobs"][0]["first_offset"] == 12


def test_a_stopped_app_without_a_pool_is_accepted() -> None:
    idle = Snapshot(
        taken_at=AT,
        process=ProcessState(pid=1, hostname="box", started_at=None, state="idle"),
        listeners=(),
        partitions=(),
        jobs=(),
        pool=None,
    )
    built = build_report(
        process_id="p",
        client_id="c",
        seq=1,
        interval=1,
        snapshot=idle,
        usage=USAGE,
        counters={},
        slowest=[],
    )
    parsed = parse_report(raw(built))
    assert parsed["pool"] is None
    assert parsed["partitions"] == []


# -- refused ----------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [b"", None])
def test_an_empty_message_is_refused(payload: bytes | None) -> None:
    assert "empty" in refused(payload)


@pytest.mark.parametrize("payload", [b"{", b"not json", b"\xff\xfe", b'{"schema": 1,}'])
def test_non_json_is_refused(payload: bytes) -> None:
    assert "not JSON" in refused(payload)


@pytest.mark.parametrize(
    ("document", "kind"), [([report()], "list"), ("report", "str"), (7, "int")]
)
def test_json_that_is_not_an_object_is_refused(document: Any, kind: str) -> None:
    message = refused(raw(document))
    assert f"a JSON {kind}" in message
    assert "not an object" in message


@pytest.mark.parametrize("schema", [0, 2, "1", None, ...])
def test_another_schema_is_refused(schema: Any) -> None:
    message = refused(raw(report(schema=schema)))
    assert "schema" in message
    assert f"this version reads {SCHEMA}" in message


WRONG_TYPES = {
    "id": 42,
    "client_id": ["shop"],
    "seq": "7",
    "at": "1000000.0",
    "interval": [5],
    "process": [],
    "counters": [500],
    "listeners": {},
    "partitions": {"topic": "orders"},
    "jobs": "none",
}


@pytest.mark.parametrize("field", list(WRONG_TYPES))
def test_a_missing_field_is_refused_and_named(field: str) -> None:
    message = refused(raw(report(**{field: ...})))
    assert f"field {field!r}" in message
    assert "missing" in message


@pytest.mark.parametrize("field", list(WRONG_TYPES))
def test_a_null_field_is_refused_and_named(field: str) -> None:
    assert f"field {field!r}" in refused(raw(report(**{field: None})))


@pytest.mark.parametrize(("field", "value"), list(WRONG_TYPES.items()))
def test_a_field_of_the_wrong_type_is_refused_and_named(field: str, value: Any) -> None:
    message = refused(raw(report(**{field: value})))
    assert f"field {field!r}" in message


def test_a_float_seq_is_refused() -> None:
    assert "field 'seq' is missing or not int" in refused(raw(report(seq=7.0)))


@pytest.mark.parametrize("field", ["seq", "at", "interval"])
@pytest.mark.parametrize("value", [True, False])
def test_a_bool_where_a_number_is_expected_is_refused(field: str, value: bool) -> None:
    assert f"field {field!r}" in refused(raw(report(**{field: value})))


@pytest.mark.parametrize("changes", [{"id": ""}, {"interval": 0}, {"interval": -5.0}])
def test_an_empty_id_or_a_non_positive_interval_is_refused(changes: dict[str, Any]) -> None:
    assert "empty id or a non-positive interval" in refused(raw(report(**changes)))


@pytest.mark.parametrize(
    "entry",
    [{"partition": 0, "lag": 3}, {"topic": None, "partition": 0}, {"topic": 5}, "orders", None],
)
def test_a_partition_entry_without_a_topic_is_refused(entry: Any) -> None:
    good = report()["partitions"][0]
    assert "partition entry without a topic" in refused(raw(report(partitions=[good, entry])))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        (
            {"counters": {"processed": "many", "errors": 0, "busy_seconds": 0.0}},
            "counter 'processed'",
        ),
        ({"pool": [1]}, "pool"),
        ({"pool": {"size": "two"}}, "pool"),
        ({"process": {"pid": 1, "rss": "big"}}, "process field 'rss'"),
        ({"partitions": [{"topic": "t", "partition": 0, "lag": "5"}]}, "partition field 'lag'"),
        ({"jobs": [1]}, "jobs"),
        ({"schema": True}, "schema"),
    ],
)
def test_values_inside_the_report_are_checked_before_folding(
    changes: dict[str, Any], named: str
) -> None:
    assert named in refused(raw(report(**changes)))


# -- the process's usage ----------------------------------------------------------------------


def burn_cpu(seconds: float) -> None:
    start = sum(os.times()[:2])
    deadline = time.monotonic() + 10
    total = 0
    while sum(os.times()[:2]) - start < seconds and time.monotonic() < deadline:
        total += sum(i * i for i in range(1000))
    assert total >= 0


def test_the_sampler_reads_memory_threads_and_cpu() -> None:
    sampler = ProcessSampler()
    burn_cpu(0.05)
    usage = sampler.sample()
    assert usage.rss > 0
    assert usage.threads >= 1
    assert usage.cpu > 0
    assert usage.cpu_seconds > 0


def test_the_sampler_share_is_since_the_previous_sample() -> None:
    sampler = ProcessSampler()
    burn_cpu(0.05)
    first = sampler.sample()
    second = sampler.sample()
    assert first.cpu > 0
    assert second.cpu >= 0
    assert second.cpu_seconds >= first.cpu_seconds


def test_latency_is_optional_and_checked_when_present() -> None:
    summary = {"count": 2, "mean": 0.1, "p50": 0.1, "p90": 0.1, "p99": 0.1, "max": 0.2}
    accepted = parse_report(raw(report(latency={"orders": {"start→end": summary}})))
    assert accepted["latency"]["orders"]["start→end"]["max"] == 0.2
    for bad in ([], {"orders": []}, {"orders": {"start→end": {"p50": "fast"}}}):
        assert "latency" in refused(raw(report(latency=bad)))
