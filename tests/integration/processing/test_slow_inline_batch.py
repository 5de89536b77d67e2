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
    """Quick for every message but the one whose payload is ``block``, which waits BLOCK s."""

    seen: Record

    def consume(self) -> None:
        for message in self.messages:
            if message.raw_payload == b"block":
                thread = threading.current_thread().name
                self.seen.add(("blocking", message.partition, message.offset, thread))
                threading.Event().wait(BLOCK)  # a call that blocks (I/O, a lock, ...)
            self.seen.add((message.partition, message.offset))
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
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        # lone messages, each consumed before the next: partition 0's batches become quick
        # and run on the listener's thread
        for n in range(30):
            producer.produce_sync(topic=topic, partition=0, payload=b"%d" % n)
            assert seen.wait_for(lambda items, n=n: (0, n) in items, 30)
        producer.produce_sync(topic=topic, partition=0, payload=b"block")
        assert seen.wait_for(lambda items: any(i[0] == "blocking" for i in items), 30)
        [(_, _, _, thread)] = [i for i in seen.items if i[0] == "blocking"]
        assert thread.startswith("conveyor-listener-"), "the slow batch ran on the listener"
        # while it blocks, the other partition is still read: someone polls
        producer.produce_sync(topic=topic, partition=1, payload=b"meanwhile")
        assert seen.wait_for(lambda items: (1, 0) in items, 5)
        assert not any(i == (0, 30) for i in seen.items), "still blocked"
        # it returns past max.poll.interval.ms; the partition reads on
        assert seen.wait_for(lambda items: (0, 30) in items, BLOCK + 10)
        for n in range(31, 41):
            producer.produce_sync(topic=topic, partition=0, payload=b"%d" % n)
        assert seen.wait_for(lambda items: (0, 40) in items, 30)
        during = list(trouble)  # (stopping the app revokes its partitions, of course)
    consumed = [i for i in seen.items if i[0] != "blocking"]
    assert len(consumed) == len(set(consumed)) == 42, "nothing read twice"
    assert during == [], during
