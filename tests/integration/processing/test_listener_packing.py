"""Routes without a subscription group are packed over ``max_listeners`` listeners of one
consumer group, evenly by partition count: four topics of 4, 3, 2 and 1 partitions on two
listeners (4 + 1 beside 3 + 2) are all read, every partition in order, by two members of the
group; a restart goes on from the offsets both of them committed."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from conveyor import Admin, App, Consumer, Producer
from helpers import Record, running

PER_TOPIC = 24


def fill(bootstrap: str, topic: str, partitions: int, first: int, count: int) -> None:
    """``count`` messages numbered from ``first``, round-robin over the partitions."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "partition": n % partitions, "payload": {"n": n}}
             for n in range(first, first + count)]
        )  # fmt: skip


def packed_app(bootstrap: str, group: str, topics: list[str], record: Record) -> App:
    class Reader(Consumer):
        def consume(self) -> None:
            record.add(*((self.topic, self.partition, m.payload["n"]) for m in self.messages))

    app = App(client_id="packing", kafka={"bootstrap.servers": bootstrap, "group.id": group},
              max_wait_time=0.2, max_listeners=2)  # fmt: skip
    for topic in topics:
        app.routes.topic(topic, Reader)
    return app


def in_order(items: list[tuple[str, int, int]]) -> dict[tuple[str, int], list[int]]:
    seen: dict[tuple[str, int], list[int]] = {}
    for topic, partition, n in items:
        seen.setdefault((topic, partition), []).append(n)
    return seen


def expected(topics: dict[str, int], first: int, count: int) -> dict[tuple[str, int], list[int]]:
    return {
        (topic, p): [n for n in range(first, first + count) if n % partitions == p]
        for topic, partitions in topics.items()
        for p in range(partitions)
    }


def two_members(admin: Admin, group: str) -> Any:
    """The group once it is stable with two members holding partitions (bounded)."""
    deadline = time.monotonic() + 60
    pause = threading.Event()
    while time.monotonic() < deadline:
        info = admin.describe_consumer_group(group)
        if info.state == "STABLE" and sum(1 for m in info.members if m.assignment) == 2:
            return info
        pause.wait(0.2)  # the broker forms the group: nothing here to wait on
    raise AssertionError(f"group {group} never had two members with partitions")


def test_four_topics_on_two_listeners(kafka_bootstrap: str, kafka_admin: Admin, new_topic) -> None:
    sizes = {new_topic(partitions=n): n for n in (4, 3, 2, 1)}
    four, three, two, one = sizes
    for topic, partitions in sizes.items():
        fill(kafka_bootstrap, topic, partitions, 0, PER_TOPIC)
    group = f"packing-{uuid.uuid4().hex[:8]}"
    record = Record()
    app = packed_app(kafka_bootstrap, group, list(sizes), record)
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 4 * PER_TOPIC), len(record.items)
        listeners = {state.name: set(state.topics) for state in app.snapshot().listeners}
        threads = {t.name for t in threading.enumerate() if t.name.startswith("conveyor-listener-")}
        info = two_members(kafka_admin, group)
    assert listeners == {f"{group}-pack-1": {four, one}, f"{group}-pack-2": {three, two}}
    assert {f"conveyor-listener-{group}-pack-1", f"conveyor-listener-{group}-pack-2"} <= threads
    held = {tuple(sorted({topic for topic, _ in m.assignment})) for m in info.members}
    assert held == {tuple(sorted((four, one))), tuple(sorted((three, two)))}, (
        "two members of one group, each assigned the topics of its pack"
    )
    assert in_order(record.items) == expected(sizes, 0, PER_TOPIC), "all, once, in order"
    committed = {
        (lag.topic, lag.partition): lag.committed for lag in kafka_admin.read_lags([group])
    }
    assert committed == {key: len(ns) for key, ns in expected(sizes, 0, PER_TOPIC).items()}

    for topic, partitions in sizes.items():
        fill(kafka_bootstrap, topic, partitions, PER_TOPIC, PER_TOPIC)
    again = Record()
    with running(packed_app(kafka_bootstrap, group, list(sizes), again)):
        assert again.wait_for(lambda items: len(items) >= 4 * PER_TOPIC), len(again.items)
    assert in_order(again.items) == expected(sizes, PER_TOPIC, PER_TOPIC), (
        "the restart resumed from the committed offsets of both listeners, reading nothing twice"
    )
