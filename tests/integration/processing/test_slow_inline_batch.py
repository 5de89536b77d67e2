"""A batch that blocks on the listener's own thread (a quick partition's batches run there) never
costs the group membership: past a threshold another thread takes over polling, hand-offs and
commits, and the blocked thread leaves that role when the user's code returns."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from conveyor import App, Consumer, Producer
from conveyor.instrumentation import events
from helpers import Record, running

BLOCK = 9.0  # seconds: past max.poll.interval.ms (7 s) below


class UsuallyQuick(Consumer):
    """Quick for every message but one whose payload starts with ``block``: run on the
    listener's thread (the partition's jobs were quick), it waits BLOCK s; run on a worker (a
    job slower than the quick bound broke the streak, which a shared machine can do at any
    time), it says so and does not wait, and the test tries again."""

    seen: Record

    def consume(self) -> None:
        for message in self.messages:
            payload = message.raw_payload
            if payload.startswith(b"block"):
                thread = threading.current_thread().name
                inline = thread.startswith("conveyor-listener-")
                self.seen.add(("blocking" if inline else "on a worker", payload, thread))
                if inline:
                    threading.Event().wait(BLOCK)  # a call that blocks (I/O, a lock, ...)
            self.seen.add((message.partition, payload))
        self.mark_as_consumed(self.messages.last)


def test_a_slow_batch_on_the_listener_s_thread_keeps_the_membership(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=2)
    seen = Record()
    consumer = type("Slow", (UsuallyQuick,), {"seen": seen})
    app = App(
        kafka={
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"slow-inline-{uuid.uuid4().hex[:8]}",
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 7000,
        },
        max_wait_time=0.2,
    )
    app.routes.topic(topic, consumer)
    trouble: list[Any] = []
    app.monitor.subscribe(events.REBALANCE_PARTITIONS_REVOKED, trouble.append)
    app.monitor.subscribe(events.ERROR_OCCURRED, trouble.append)
    sent: list[bytes] = []

    def consumed(partition: int, payload: bytes) -> None:
        producer.produce_sync(topic=topic, partition=partition, payload=payload)
        sent.append(payload)
        assert seen.wait_for(lambda items: (partition, payload) in items, 30)

    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        # lone messages, each consumed before the next: partition 0's batches become quick
        # and run on the listener's thread; then the one that blocks
        blocked = None
        for attempt in range(10):
            for _ in range(10):
                consumed(0, b"%d" % len(sent))
            block = b"block-%d" % attempt
            producer.produce_sync(topic=topic, partition=0, payload=block)
            sent.append(block)
            told = ("blocking", block), ("on a worker", block)
            assert seen.wait_for(lambda items, t=told: any(i[:2] in t for i in items), 30)
            if told[0] in [i[:2] for i in seen.items]:
                blocked = block
                break
            assert seen.wait_for(lambda items, b=block: (0, b) in items, 30)
        assert blocked is not None, "no batch of 10 quick lone messages ran on the listener"
        # while it blocks, the other partition is still read: someone polls
        consumed(1, b"meanwhile")
        assert (0, blocked) not in seen.items, "still blocked"
        # it returns past max.poll.interval.ms; the partition reads on
        assert seen.wait_for(lambda items: (0, blocked) in items, BLOCK + 10)
        for _ in range(10):
            consumed(0, b"%d" % len(sent))
        during = list(trouble)  # (stopping the app revokes its partitions, of course)
    read = [i for i in seen.items if isinstance(i[0], int)]
    assert len(read) == len(set(read)) == len(sent), "each read once"
    assert during == [], during
