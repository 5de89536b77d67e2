"""Direct assignment of several topics in one app: one consumer class reads fixed partitions of
two topics with no group rebalance, every message of those partitions once and in order, and
nothing of the partitions left out; in a consumer group of their own beside a subscribed
topic, committed so that a restart resumes where the last run stopped."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import confluent_kafka
import pytest

from conveyor import App, Consumer, Event, Producer
from helpers import Record, running

_PER_PARTITION = 20


def make_app(bootstrap: str, **settings: Any) -> App:
    kafka = {"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"}
    return App(client_id="test", kafka=kafka, max_wait_time=0.2, **settings)


def fill(bootstrap: str, *topics: str, partitions: int = 3) -> None:
    """``_PER_PARTITION`` messages in every partition of each topic, payload ``[topic, n]``."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "payload": [topic, n], "partition": partition}
                for topic in topics
                for partition in range(partitions)
                for n in range(_PER_PARTITION)
            ]
        )


def by_partition(items: list[tuple[str, int, int, list[Any]]]) -> dict[tuple[str, int], list[int]]:
    seen: dict[tuple[str, int], list[int]] = {}
    for topic, partition, offset, payload in items:
        assert payload[0] == topic, "a message delivered under another topic's name"
        seen.setdefault((topic, partition), []).append(offset)
    return seen


def test_one_consumer_class_reads_assigned_partitions_of_two_topics(
    kafka_bootstrap: str, new_topic
) -> None:
    orders, payments = new_topic(partitions=3), new_topic(partitions=3)
    fill(kafka_bootstrap, orders, payments)
    record = Record()

    class Merged(Consumer):
        def consume(self) -> None:
            assert {(m.topic, m.partition) for m in self.messages} == {
                (self.topic, self.partition)
            }, "one partition of one topic per batch"
            record.add(*((m.topic, m.partition, m.offset, m.payload) for m in self.messages))

    # one listener: the streams merged in one librdkafka consumer (packing would spread them)
    app = make_app(kafka_bootstrap, concurrency=2, max_listeners=1)
    app.routes.topic(orders, Merged, assign=[0, 2])
    app.routes.topic(payments, Merged, assign=1)
    wanted = {(orders, 0), (orders, 2), (payments, 1)}
    with running(app):
        assert record.wait_for(lambda items: len(items) >= len(wanted) * _PER_PARTITION)
        snapshot = app.snapshot()
    seen = by_partition(record.items)
    assert set(seen) == wanted  # nothing of orders/1, payments/0 or payments/2
    for key, offsets in seen.items():
        assert offsets == list(range(_PER_PARTITION)), key  # every message once, in order
    assert len(snapshot.listeners) == 1, "both topics' partitions in one librdkafka consumer"


def test_a_restarted_app_resumes_assigned_partitions_where_it_committed(
    kafka_bootstrap: str, new_topic
) -> None:
    """Assigned topics in a consumer group of their own, beside a subscribed topic: both kinds
    commit, so a second run reads only what was produced after the first."""
    orders, payments, audit = new_topic(partitions=3), new_topic(partitions=3), new_topic()
    fill(kafka_bootstrap, orders, payments)
    fill(kafka_bootstrap, audit, partitions=1)
    group = f"test-{uuid.uuid4().hex[:8]}"
    record = Record()

    class Merged(Consumer):
        def consume(self) -> None:
            record.add(*((m.topic, m.partition, m.offset, m.payload) for m in self.messages))

    def build() -> App:
        app = App(
            client_id="test",
            kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group},
            max_wait_time=0.2,
        )
        app.routes.topic(audit, Merged)  # subscribed: the group has a member while it runs
        with app.routes.consumer_group(f"{group}-assigned"):
            app.routes.topic(orders, Merged, assign=[1])
            app.routes.topic(payments, Merged, assign=[0, 2])
        return app

    wanted = {(orders, 1), (payments, 0), (payments, 2), (audit, 0)}
    with running(build()):
        assert record.wait_for(lambda items: len(items) >= len(wanted) * _PER_PARTITION)
    first = len(record.items)
    assert set(by_partition(record.items)) == wanted
    fill(kafka_bootstrap, orders, payments)  # offsets 20..39 of every partition
    fill(kafka_bootstrap, audit, partitions=1)
    with running(build()):
        assert record.wait_for(lambda items: len(items) >= first + len(wanted) * _PER_PARTITION)
    seen = by_partition(record.items[first:])
    assert set(seen) == wanted
    for key, offsets in seen.items():
        assert offsets == list(range(_PER_PARTITION, 2 * _PER_PARTITION)), key


def test_a_commit_the_group_refuses_is_reported(
    kafka_bootstrap: str, new_topic, caplog: pytest.LogCaptureFixture
) -> None:
    """An assigned partition committed in a group that has members in another process (the
    mix an app refuses within itself): the group refuses each commit (the listener is no
    member of it). Each refusal is an offsets.commit_refused event and a WARNING, the
    asynchronous commits' while the app runs and the last synchronous one as it stops."""
    orders, elsewhere = new_topic(), new_topic()
    fill(kafka_bootstrap, orders, partitions=1)
    group = f"test-{uuid.uuid4().hex[:8]}"
    member = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "log_level": 0}
    )
    try:
        member.subscribe([elsewhere])
        deadline = time.monotonic() + 30
        while not member.assignment():  # the group has a member from now on
            assert time.monotonic() < deadline, "the other process never joined its group"
            member.poll(0.5)
        refused: list[Event] = []
        changed = threading.Condition()

        def on_refused(event: Event) -> None:
            with changed:
                refused.append(event)
                changed.notify_all()

        class Orders(Consumer):
            def consume(self) -> None:
                return None

        app = App(
            client_id="test",
            kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
                   "auto.commit.interval.ms": 500},
            max_wait_time=0.2,
        )  # fmt: skip
        app.routes.topic(orders, Orders, assign=[0])
        app.monitor.subscribe("offsets.commit_refused", on_refused)
        with caplog.at_level(logging.WARNING, logger="conveyor.processing"), running(app), changed:
            assert changed.wait_for(lambda: refused, 30), "no refusal reported"
    finally:
        member.close()
    first = refused[0]
    assert first["offsets"] == [(orders, 0, _PER_PARTITION)]
    assert first["group"] == group
    assert first["sync"] is False, "the interval's asynchronous commit, while running"
    assert first["error"].name in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"), first["error"]
    assert refused[-1]["sync"] is True, "the last commit, as the app stopped, refused too"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"{orders}/0 refused" in line for line in warnings), warnings
