"""app.snapshot() shows the running engine as it is: the process, the listener, each assigned
partition's offsets, lag, pause and retries, the batch running now and the pool's usage;
it can be taken from any thread at any moment."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any

from conveyor import App, Consumer, Producer
from helpers import Record, running


def test_snapshot_of_a_running_app(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": {"n": n}, "partition": n % 2} for n in range(10)]
        )
    inside = threading.Event()
    release = threading.Event()
    record = Record()

    class Orders(Consumer):
        def consume(self) -> None:
            if self.partition == 0:
                inside.set()
                release.wait(30)
            elif self.messages.first.offset == 0 and not self.retrying:
                raise RuntimeError("partition 1 fails once")
            record.add(*((self.partition, m.offset) for m in self.messages))

    app = App(
        client_id="snapshot",
        kafka={
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "auto.commit.interval.ms": 200,
        },
        concurrency=3,
        max_wait_time=0.2,
        pause_timeout=30.0,
        pause_max_timeout=30.0,
    )
    app.routes.topic(topic, Orders)
    idle = app.snapshot()
    assert idle.process.state == "idle"
    assert (idle.listeners, idle.partitions, idle.jobs, idle.pool) == ((), (), (), None)
    with running(app):
        try:
            assert inside.wait(30)
            check_while_running(app, topic, record, release)
        finally:
            release.set()
    stopped = app.snapshot()
    assert stopped.process.state == "stopped"
    assert [listener.state for listener in stopped.listeners] == ["stopped"]


def check_while_running(app: App, topic: str, record: Record, release: threading.Event) -> None:
    """What the snapshot shows while partition 0 runs a batch and partition 1 waits to retry."""

    def settled(snapshot: Any) -> bool:
        states = {p.partition: p for p in snapshot.partitions}
        return len(states) == 2 and states[1].paused and len(snapshot.jobs) == 1

    deadline = time.monotonic() + 30
    snapshot = app.snapshot()
    while not settled(snapshot) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a read-only view in a test, not a wait path
        snapshot = app.snapshot()
    assert settled(snapshot), snapshot

    assert snapshot.process.pid == os.getpid()
    assert snapshot.process.state == "running"
    assert snapshot.process.started_at is not None
    assert snapshot.process.started_at <= snapshot.taken_at
    [listener] = snapshot.listeners
    assert (listener.consumer_group, listener.topics, listener.state) == (
        app.settings.kafka["group.id"], (topic,), "running",
    )  # fmt: skip
    assert listener.partitions == 2
    assert listener.last_poll_at is not None
    assert snapshot.taken_at - listener.last_poll_at < 5
    states = {p.partition: p for p in snapshot.partitions}
    busy, failing = states[0], states[1]
    assert busy.consumer == "Orders"
    assert busy.high_watermark == 5
    assert busy.marked is None, "the running batch is not marked yet"
    assert (busy.paused, busy.retrying, busy.attempt) == (False, False, 0)
    assert (failing.paused, failing.retrying, failing.attempt) == (True, True, 1)
    assert failing.lag == 5, "nothing of partition 1 went through"
    [job] = snapshot.jobs
    # The first batch: offset 0 and what was fetched with it (a first message that came
    # after a wait goes on alone; the rest of its fetch comes with the next batch).
    assert (job.topic, job.partition, job.first_offset) == (topic, 0, 0)
    assert job.last_offset in (0, 4)
    assert job.count == job.last_offset + 1
    assert job.started_at <= snapshot.taken_at
    assert snapshot.pool is not None
    assert snapshot.pool.size == 3
    assert snapshot.pool.busy >= 1
    json.dumps(snapshot.to_dict())

    release.set()
    assert record.wait_for(lambda items: sum(1 for p, _ in items if p == 0) == 5)

    def committed(snapshot: Any) -> bool:
        states = {p.partition: p for p in snapshot.partitions}
        return states[0].committed == 5 and states[0].lag == 0 and not snapshot.jobs

    deadline = time.monotonic() + 30
    while not committed(app.snapshot()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert committed(app.snapshot())


def test_snapshots_from_many_threads_while_consuming(kafka_bootstrap: str, new_topic) -> None:
    """Reading the engine from two threads while it consumes neither fails nor disturbs it."""
    topic = new_topic(partitions=4)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": b"x", "partition": n % 4} for n in range(20_000)]
        )
    record = Record()

    class Counting(Consumer):
        def consume(self) -> None:
            record.add(len(self.messages))

    app = App(
        client_id="snapshot",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"},
        max_wait_time=0.2,
    )
    app.routes.topic(topic, Counting)
    stop = threading.Event()
    taken: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not stop.is_set():
                snapshot = app.snapshot()
                taken.append(len(snapshot.partitions))
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    with running(app):
        for reader in readers:
            reader.start()
        assert record.wait_for(lambda items: sum(items) >= 20_000)
        stop.set()
        for reader in readers:
            reader.join(10)
    assert errors == []
    assert sum(record.items) == 20_000
    assert taken
    assert max(taken) == 4
