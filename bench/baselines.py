"""Bare confluent-kafka loops: the yardsticks every Conveyor benchmark is measured against.

Each function runs one loop against a real broker and returns messages per second.
They are written the way an experienced user would write them by hand, with no
framework in between, so a ratio against them is an honest one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from harness import RateMeter

__all__ = ["bare_batch_consume", "bare_poll_consume", "bare_produce", "fill_topic"]


def bare_produce(
    bootstrap: str,
    topic: str,
    count: int,
    payload: bytes,
    per_message_handle: bool = False,
    config: dict[str, Any] | None = None,
) -> float:
    """Produce ``count`` messages and wait for every delivery report; return msgs/s.

    With one producer-wide delivery callback (``on_delivery`` in the config): the least
    a real application needs to learn of failures. With ``per_message_handle`` a small
    object per message carries its own callback, as a naive "future per message" would.
    """
    failures = 0

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    settings: dict[str, Any] = {**(config or {}), "bootstrap.servers": bootstrap}
    if not per_message_handle:
        settings["on_delivery"] = on_delivery
    producer = Producer(settings)
    produce, poll = producer.produce, producer.poll
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                if per_message_handle:
                    produce(topic, payload, None, -1, _Handle().on_delivery)
                else:
                    produce(topic, payload)
                break
            except BufferError:
                poll(0.05)  # the local queue is full: serve deliveries until there is room
        poll(0)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(
            f"bare produce lost messages: {remaining} undelivered, {failures} failed"
        )
    return count / elapsed


class _Handle:
    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: KafkaError | None = None

    def on_delivery(self, error: KafkaError | None, _message: Any) -> None:
        self.error = error


def fill_topic(bootstrap: str, topic: str, count: int, payload: bytes, partitions: int = 1) -> None:
    """Write ``count`` messages spread round-robin over ``partitions`` (setup, not measured)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    for index in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=index % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("could not fill the benchmark topic")


def _consumer(bootstrap: str, topic: str, config: dict[str, Any] | None = None) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **(config or {}),
        }
    )
    consumer.subscribe([topic])
    return consumer


def bare_batch_consume(
    bootstrap: str,
    topic: str,
    count: int,
    batch_size: int = 500,
    config: dict[str, Any] | None = None,
    decode: Callable[[bytes], Any] | None = None,
) -> float:
    """Read ``count`` messages with ``consume(num_messages=batch_size)``; msgs/s as a
    :class:`~harness.RateMeter` defines it (the same definition as Conveyor's side). With
    ``decode``, every payload is decoded with it (as a loop that reads its messages does)."""
    consumer = _consumer(bootstrap, topic, config)
    meter = RateMeter(count)
    deadline = time.monotonic() + 120
    try:
        while not meter.done.is_set() and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=batch_size, timeout=1.0)
            if decode is None:
                meter.add(sum(1 for message in batch if message.error() is None))
                continue
            decoded = [decode(message.value()) for message in batch if message.error() is None]
            meter.add(len(decoded))
    finally:
        consumer.close()
    return meter.rate()


def bare_poll_consume(bootstrap: str, topic: str, count: int) -> float:
    """Read ``count`` messages one ``poll()`` at a time; msgs/s as a RateMeter defines it."""
    consumer = _consumer(bootstrap, topic)
    meter = RateMeter(count)
    deadline = time.monotonic() + 120
    try:
        while not meter.done.is_set() and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                meter.add(1)
    finally:
        consumer.close()
    return meter.rate()
