"""Routing patterns against the real broker: a regex route reads every matching topic, one
created while the app runs included (no restart), and never a topic that does not match; a
topic routed by name in the same group keeps its own route."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import ClassVar

from conveyor import Admin, App, Consumer, Producer
from helpers import running


class Seen(Consumer):
    """Records (route, topic, payload) of everything it consumes."""

    seen: ClassVar[list[tuple[str, str, str]]] = []
    changed: ClassVar[threading.Condition] = threading.Condition()

    def consume(self) -> None:
        with self.changed:
            for message in self.messages:
                self.seen.append((type(self).__name__, message.topic, message.raw_payload.decode()))
            self.changed.notify_all()


class ByName(Seen):
    pass


def wait_seen(check: Callable[[list[tuple[str, str, str]]], bool], timeout: float = 60) -> None:
    with Seen.changed:
        assert Seen.changed.wait_for(lambda: check(Seen.seen), timeout), Seen.seen


def test_a_pattern_reads_every_matching_topic_a_new_one_included(
    kafka_bootstrap: str, kafka_admin: Admin
) -> None:
    prefix = f"pat{uuid.uuid4().hex[:8]}"
    first, named, other, later = f"{prefix}.eu", f"{prefix}.us", f"x{prefix}.eu", f"{prefix}.asia"
    for topic in (first, named, other):
        kafka_admin.create_topic(topic, partitions=2)
    Seen.seen = []
    app = App(
        client_id="patterns",
        kafka={
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"g-{prefix}",
            "topic.metadata.refresh.interval.ms": 1_000,
        },
        max_wait_time=0.2,
    )
    app.routes.pattern(rf"^{prefix}\..+$", Seen)
    app.routes.topic(named, ByName)
    try:
        with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            for topic in (first, named, other):
                producer.produce_sync(topic=topic, payload=f"to {topic}")
            wait_seen(lambda seen: {t for _, t, _ in seen} >= {first, named})
            kafka_admin.create_topic(later, partitions=1)
            started = time.monotonic()
            deadline = started + 60
            while not any(t == later for _, t, _ in Seen.seen):  # its metadata comes on refresh
                assert time.monotonic() < deadline, "the new topic was never consumed"
                producer.produce_sync(topic=later, payload=f"to {later}")
                with Seen.changed:
                    Seen.changed.wait(1.0)
            producer.produce_sync(topic=first, payload="after")
            wait_seen(lambda seen: ("Seen", first, "after") in seen)
    finally:
        for topic in (first, named, other, later):
            kafka_admin.delete_topic(topic)
    assert ("Seen", first, f"to {first}") in Seen.seen
    assert ("ByName", named, f"to {named}") in Seen.seen, "the route by name wins"
    assert not any(t == named for r, t, _ in Seen.seen if r == "Seen")
    assert not any(t == other for _, t, _ in Seen.seen), "a topic that does not match is not read"
