"""Scheduled messages against the real broker: a message produced for later arrives at its time
(never before, and before the one due after it; key and headers kept), a cancelled one never,
one whose time has passed at once; a schedule outlives the app that loaded it (a new process
picks it up and sends it, not before its time, once).

Lateness is shown, not asserted: the machines are shared. The order of arrivals is the marker
that a due message was sent by its own timer and not by the next one's."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, ClassVar

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition

from conveyor import Admin, App, Consumer, Producer
from helpers import running


class Arrivals(Consumer):
    got: ClassVar[list[tuple[float, str, bytes | None, dict[str, bytes]]]] = []
    changed: ClassVar[threading.Condition] = threading.Condition()

    def consume(self) -> None:
        now = time.time()
        with self.changed:
            for m in self.messages:
                self.got.append((now, m.raw_payload.decode(), m.raw_key, dict(m.raw_headers)))
            self.changed.notify_all()


def wait_for(
    payload: str, timeout: float = 30
) -> tuple[float, str, bytes | None, dict[str, bytes]]:
    with Arrivals.changed:
        assert Arrivals.changed.wait_for(
            lambda: any(p == payload for _, p, _, _ in Arrivals.got), timeout
        ), Arrivals.got
        return next(item for item in Arrivals.got if item[1] == payload)


def new_app(bootstrap: str, group: str, target: str, schedules: str) -> App:
    app = App(client_id="sched", kafka={"bootstrap.servers": bootstrap, "group.id": group},
              max_wait_time=0.2)  # fmt: skip
    app.routes.topic(target, Arrivals)
    app.schedules.enable(topic=schedules, partitions=2)
    return app


def test_scheduled_messages_arrive_on_time_and_cancelled_ones_never(
    kafka_bootstrap: str, new_topic, kafka_admin: Admin
) -> None:
    target = new_topic()
    schedules = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    Arrivals.got = []
    app = new_app(kafka_bootstrap, f"g-{uuid.uuid4().hex[:8]}", target, schedules)
    assigned: set[tuple[str, int]] = set()
    changed = threading.Condition()

    def on_assigned(event: Any) -> None:
        with changed:
            assigned.update(event["partitions"])
            changed.notify_all()

    app.monitor.subscribe("rebalance.partitions_assigned", on_assigned)
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        with changed:  # scheduled once the app holds the schedules (a slow join made every
            # schedule due by the time they loaded, and then they went out in any order)
            assert changed.wait_for(lambda: {(schedules, 0), (schedules, 1)} <= assigned, 30)
        now = time.time()
        on_time = now + 2.0
        producer.produce_at(on_time, topic=target, payload=b"on time", key="k1",
                            headers=[("trace", b"t1")], schedules_topic=schedules)  # fmt: skip
        cancelled = producer.produce_at(now + 2.5, topic=target, payload=b"cancelled",
                                        schedules_topic=schedules)  # fmt: skip
        producer.produce_at(now - 60, topic=target, payload=b"overdue", schedules_topic=schedules)
        producer.cancel_scheduled(cancelled, schedules_topic=schedules)
        producer.produce_at(now + 3.5, topic=target, payload=b"after", schedules_topic=schedules)
        wait_for("overdue")
        arrived, _, key, headers = wait_for("on time")
        wait_for("after")
    order = [p for _, p, _, _ in Arrivals.got]
    late = f"on time came {arrived - on_time:.3f} s after its time"
    assert order == ["overdue", "on time", "after"], (
        order,
        late,
    )  # overdue at once, each by its own time
    assert on_time <= arrived + 0.005, "not before its time"
    assert key == b"k1"
    assert headers == {"trace": b"t1"}, "its own headers, none of the schedule's"
    assert not any(p == "cancelled" for _, p, _, _ in Arrivals.got)
    assert [p for _, p, _, _ in Arrivals.got].count("on time") == 1


def test_a_schedule_outlives_the_process_that_loaded_it(kafka_bootstrap: str, new_topic) -> None:
    target = new_topic()
    schedules = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    group = f"g-{uuid.uuid4().hex[:8]}"
    Arrivals.got = []
    first = new_app(kafka_bootstrap, group, target, schedules)
    with running(first), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        at = time.time() + 6.0
        producer.produce_at(at, topic=target, payload=b"later", schedules_topic=schedules)
        deadline = time.monotonic() + 30
        while first.schedules.pending() < 1:  # loaded by the first process
            assert time.monotonic() < deadline
            threading.Event().wait(0.05)
    assert not Arrivals.got, "not sent by the first process: it stopped before the time"
    second = new_app(kafka_bootstrap, group, target, schedules)
    with running(second):
        arrived, _, _, _ = wait_for("later")
    assert at <= arrived + 0.005, "not before its time"
    assert {p for _, p, _, _ in Arrivals.got} == {"later"}
    # Sent once: both processes have stopped, so the target's end offset counts every send
    # there ever was (what Arrivals saw may repeat a message: its consumer is at-least-once,
    # and a rebalance under load can hand it the same offset again).
    probe = KafkaConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"probe-{group}"})
    try:
        assert probe.get_watermark_offsets(TopicPartition(target, 0), timeout=10) == (0, 1)
    finally:
        probe.close()


def test_a_schedule_for_a_topic_the_app_does_not_route_is_refused_and_never_sent(
    kafka_bootstrap: str, new_topic, kafka_admin: Admin
) -> None:
    """A record on the schedules topic must not make the app produce anywhere: a schedule for
    a topic the app neither routes nor allows is refused, counted and tombstoned; one for a
    topic in ``allowed_topics`` goes out, and so does one for a route's topic due after both
    (the marker that the refused one had its turn)."""
    target, elsewhere, allowed = new_topic(), new_topic(), new_topic()
    schedules = new_topic(partitions=1, config={"cleanup.policy": "compact"})
    Arrivals.got = []
    app = App(client_id="sched", kafka={"bootstrap.servers": kafka_bootstrap,
                                        "group.id": f"g-{uuid.uuid4().hex[:8]}"}, max_wait_time=0.2)  # fmt: skip
    app.routes.topic(target, Arrivals)
    app.schedules.enable(topic=schedules, partitions=1, allowed_topics=[allowed])
    refusals: list[dict[str, Any]] = []
    app.monitor.subscribe(
        "error.occurred", lambda event: refusals.append(dict(event))
        if event["type"] == "schedule.refused" else None,
    )  # fmt: skip
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        now = time.time()
        producer.produce_at(
            now - 2, topic=elsewhere, payload=b"intruded", schedules_topic=schedules
        )
        producer.produce_at(  # refused as it is read, not held in memory for an hour
            now + 3600, topic=elsewhere, payload=b"later", schedules_topic=schedules
        )
        producer.produce_at(now - 1, topic=allowed, payload=b"allowed", schedules_topic=schedules)
        producer.produce_at(now + 1, topic=target, payload=b"routed", schedules_topic=schedules)
        wait_for("routed")
    assert app.schedules.refused == 2
    assert [(event["topic"], type(event["error"]).__name__) for event in refusals] == [
        (elsewhere, "ConveyorError")
    ] * 2
    assert kafka_admin.read_watermark_offsets(elsewhere, 0) == (0, 0), "nothing sent there"
    assert kafka_admin.read_watermark_offsets(allowed, 0)[1] == 1
    states = [
        dict(message.raw_headers).get("conveyor-schedule-state")
        for message in kafka_admin.read_topic(schedules, 0, 10, start_offset=0)
        if message.raw_payload is None
    ]
    assert states.count(b"refused") == 2, states
    assert states.count(b"dispatched") == 2, states
