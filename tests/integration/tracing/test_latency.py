"""Per-stage latency against the real broker: every stage measured for every message, the
send-time stamp only while it is asked for, and the commit stage resolved by commits."""

from __future__ import annotations

import threading
import time
import uuid

from conveyor import App, Consumer
from conveyor.tracing import PRODUCED_AT, STAGES
from helpers import Record, running


def test_every_stage_of_every_message_is_measured(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic(config={"message.timestamp.type": "LogAppendTime"})
    app = App(
        client_id="latency",
        kafka={
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"latency-{uuid.uuid4().hex[:6]}",
            "auto.commit.interval.ms": 100,
        },
        max_wait_time=0.05,
        max_messages=4,
    )
    seen = Record()
    delay = 0.02

    class Slow(Consumer):
        def consume(self) -> None:
            threading.Event().wait(delay)  # a consume() of known length
            seen.add(*(message.offset for message in self.messages))

    app.routes.topic(topic, Slow)
    app.latency.enable()
    measured = Record()
    app.monitor.subscribe("latency.measured", lambda event: measured.add(event["count"]))
    committed = Record()
    app.monitor.subscribe(
        "offsets.committed", lambda event: committed.add(*(o for _t, _p, o in event["offsets"]))
    )
    before = time.time()
    app.producer.produce_many_sync([{"topic": topic, "payload": b"m"} for _ in range(20)])
    with running(app):
        assert seen.wait_for(lambda offsets: len(set(offsets)) == 20)
        assert committed.wait_for(lambda offsets: 20 in offsets)
    elapsed = time.time() - before
    stages = app.latency.snapshot()[topic]
    assert list(stages) == list(STAGES)
    for stage in STAGES:
        assert stages[stage].count == 20, stage
        assert 0 <= stages[stage].p50 <= stages[stage].max <= elapsed, stage
    assert stages["start→end"].p50 >= delay * 0.9
    assert stages["produce→end"].max >= stages["start→end"].max
    assert sum(measured.items) == 20
    stamped = read_messages(topic, 1)[0]
    assert PRODUCED_AT in dict(stamped.headers())


def test_without_stamp_no_header_is_added_and_timestamps_are_used(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()
    app = App(
        client_id="latency",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:6]}"},
        max_wait_time=0.05,
    )
    seen = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            seen.add(*(message.offset for message in self.messages))

    app.routes.topic(topic, Reader)
    app.latency.enable(stamp=False)
    app.producer.produce_sync(topic=topic, payload=b"m")
    with running(app):
        assert seen.wait_for(lambda offsets: offsets == [0])
    assert read_messages(topic, 1)[0].headers() is None
    stages = app.latency.snapshot()[topic]
    assert "produce→append" not in stages, "create-time timestamps: no append time to measure"
    assert stages["append→poll"].count == 1
    assert stages["produce→end"].count == 1
