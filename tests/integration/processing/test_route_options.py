"""Route options and consumer API a user relies on: consumer and subscription groups,
per-topic batch size and wait, key and header deserializers and tombstones, adaptive
batching, explicit resume(), and the app's own iterator."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from conveyor import Admin, App, Consumer, Producer
from conveyor.messages import Deserializers
from helpers import Record, running


def make_app(bootstrap: str, **settings: Any) -> App:
    kafka = {"bootstrap.servers": bootstrap, "group.id": f"opt-{uuid.uuid4().hex[:8]}"}
    kafka.update(settings.pop("kafka", {}))
    settings.setdefault("max_wait_time", 0.2)
    return App(client_id="options", kafka=kafka, **settings)


def fill(bootstrap: str, topic: str, count: int) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in range(count)])


def test_consumer_and_subscription_groups(kafka_bootstrap: str, new_topic) -> None:
    """Routes inside ``consumer_group("x")`` commit under group x; a ``subscription_group``
    gets its own listener (its own librdkafka consumer) in the same group."""
    first, second, third = new_topic(), new_topic(), new_topic()
    for topic in (first, second, third):
        fill(kafka_bootstrap, topic, 2)
    record = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            record.add(*((self.topic, self.route.consumer_group) for _ in self.messages))

    billing, audit = f"billing-{uuid.uuid4().hex[:6]}", f"audit-{uuid.uuid4().hex[:6]}"
    app = make_app(kafka_bootstrap)
    with app.routes.consumer_group(billing):
        app.routes.topic(first, Reader)
        with app.routes.subscription_group("slow-lane"):
            app.routes.topic(second, Reader)
    with app.routes.consumer_group(audit):
        app.routes.topic(third, Reader)
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 6)
        listeners = {
            listener.topics: listener.consumer_group for listener in app.snapshot().listeners
        }
    assert sorted(set(record.items)) == sorted(
        {(first, billing), (second, billing), (third, audit)}
    )
    assert listeners == {(first,): billing, (second,): billing, (third,): audit}, (
        "three listeners: the subscription group reads apart from its consumer group"
    )
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        committed = {
            (lag.group, lag.topic): lag.committed for lag in admin.read_lags([billing, audit])
        }
    assert committed == {(billing, first): 2, (billing, second): 2, (audit, third): 2}


def test_per_topic_max_messages_and_max_wait_time(kafka_bootstrap: str, new_topic) -> None:
    """``max_messages=3`` on the route caps its batches (the app allows 100); the route's
    ``max_wait_time=0.05`` (the app's is 30 s) sets how long its listener waits for messages,
    which shows in how soon an idle partition's ``tick()`` comes round."""
    topic = new_topic()
    fill(kafka_bootstrap, topic, 10)
    record = Record()

    class Small(Consumer):
        def consume(self) -> None:
            record.add([m.payload["n"] for m in self.messages])

        def tick(self) -> None:
            record.add("tick")

    app = make_app(kafka_bootstrap, max_messages=100, max_wait_time=30)
    app.routes.topic(topic, Small, max_messages=3, max_wait_time=0.05)
    with running(app):
        # Three ticks: after 90 s with the app's wait, in a fraction of a second with the route's.
        assert record.wait_for(lambda items: items.count("tick") >= 3, timeout=20)
    batches = [item for item in record.items if item != "tick"]
    assert [n for batch in batches for n in batch] == list(range(10))
    assert max(len(batch) for batch in batches) == 3


def test_a_lone_message_is_handed_on_without_waiting_for_max_wait_time(
    kafka_bootstrap: str, new_topic
) -> None:
    """Adaptive batching: the listener blocks for the first message only, then takes what is
    there; with max_wait_time=30 a lone message still arrives at once (well within 10 s).
    The batching rule itself: tests/unit/driver/test_consumers.py."""
    topic = new_topic()
    record = Record()

    class Lone(Consumer):
        def consume(self) -> None:
            record.add(*(m.payload["n"] for m in self.messages))

    app = make_app(kafka_bootstrap, max_wait_time=30)
    app.routes.topic(topic, Lone)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
    with running(app):
        assert assigned.wait(30)
        fill(kafka_bootstrap, topic, 1)
        assert record.wait_for(lambda items: items == [0], timeout=10)


def test_key_and_header_deserializers_and_tombstones(kafka_bootstrap: str, new_topic) -> None:
    """The route's deserializers decode keys and headers; a tombstone (no payload) reads as
    ``None`` without calling the payload deserializer."""
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(
            topic=topic, payload=b"7", key=b"42", headers=[("v", b"2"), ("v", b"3")]
        )
        producer.produce_sync(topic=topic, payload=None, key=b"43")
    record = Record()
    decoded: list[bytes] = []

    def payload(raw: bytes) -> int:
        decoded.append(raw)
        return int(raw)

    class Typed(Consumer):
        def consume(self) -> None:
            record.add(*((m.key, m.headers, m.payload) for m in self.messages))

    app = make_app(kafka_bootstrap)
    app.routes.topic(
        topic,
        Typed,
        deserializers=Deserializers(
            payload=payload,
            key=int,
            headers=lambda pairs: [(name, int(value)) for name, value in pairs],
        ),
    )
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 2)
    assert record.items == [(42, [("v", 2), ("v", 3)], 7), (43, [], None)]
    assert decoded == [b"7"], "the tombstone's payload was not deserialized"


def test_resume_after_an_open_ended_pause(kafka_bootstrap: str, new_topic) -> None:
    """``pause()`` without a timeout holds the partition until ``resume()``; processing goes
    on from the message after the last one marked."""
    topic = new_topic()
    fill(kafka_bootstrap, topic, 4)
    record = Record()
    paused = threading.Event()
    holder: list[Consumer] = []

    class Pausing(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.offset == 1 and not paused.is_set():
                    holder.append(self)
                    self.pause()
                    paused.set()
                    return
                record.add(message.offset)
                self.mark_as_consumed(message)

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Pausing)
    with running(app):
        assert paused.wait(30)
        record.add("resumed")  # anything processed before this line ignored the pause
        holder[0].resume()
        assert record.wait_for(lambda items: 3 in items)
    assert record.items == [0, "resumed", 1, 2, 3]


def test_the_apps_iterator_uses_its_settings_and_monitor(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    fill(kafka_bootstrap, topic, 3)
    app = make_app(kafka_bootstrap)
    with app.iterator({topic: True}) as iterator:
        assert iterator.monitor is app.monitor
        seen = []
        for message in iterator:
            seen.append(message.payload["n"])
            if len(seen) == 3:
                iterator.stop()
    assert seen == [0, 1, 2]
