"""Transactions: what a committed block produced is visible to read_committed consumers,
what an aborted block produced is not, and misuse is refused clearly."""

from __future__ import annotations

import uuid

import pytest

from conveyor import Monitor, Producer, TransactionError


def test_committed_messages_are_visible_and_aborted_ones_are_not(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()
    monitor = Monitor()
    events: list[str] = []
    monitor.subscribe("*", lambda event: events.append(event.name))
    settings = {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    with Producer(settings, monitor=monitor) as producer:
        with producer.transaction():
            producer.produce_async(topic=topic, payload=b"committed-1")
            producer.produce_sync(topic=topic, payload=b"committed-2")

        def abort_after_producing() -> None:
            with producer.transaction():
                producer.produce_sync(topic=topic, payload=b"aborted")  # on the broker, uncommitted
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            abort_after_producing()
        report = producer.produce_sync(topic=topic, payload=b"implicit")  # a transaction of its own
        assert report.topic == topic
        producer.produce_many_sync([{"topic": topic, "payload": b"implicit-burst"}])

    committed = read_messages(topic, 4, timeout=10, **{"isolation.level": "read_committed"})
    assert [m.value() for m in committed] == [
        b"committed-1",
        b"committed-2",
        b"implicit",
        b"implicit-burst",
    ]
    everything = read_messages(topic, 5, timeout=10, **{"isolation.level": "read_uncommitted"})
    assert b"aborted" in [m.value() for m in everything]
    assert events.count("transaction.committed") == 3
    assert events.count("transaction.aborted") == 1


def test_nested_transactions_are_refused(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    settings = {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    with Producer(settings) as producer, producer.transaction():
        producer.produce_async(topic=topic, payload=b"x")
        with pytest.raises(TransactionError, match="do not nest"), producer.transaction():
            pass


def test_a_plain_producer_has_no_transactions(kafka_bootstrap: str) -> None:
    with (
        Producer({"bootstrap.servers": kafka_bootstrap}) as producer,
        pytest.raises(TransactionError, match=r"transactional\.id"),
        producer.transaction(),
    ):
        pass
