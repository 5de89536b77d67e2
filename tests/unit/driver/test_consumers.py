"""The consumer client's adaptive batching, without a broker: block for the first message
only, then take what librdkafka already holds without waiting."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from conveyor.driver.consumers import ConsumerClient


class FakeConsume:
    """Stands in for librdkafka's ``consume(num_messages, timeout)``: hands out what it holds
    and records each call."""

    def __init__(self, held: int) -> None:
        self.held = held
        self.calls: list[tuple[int, float]] = []

    def __call__(self, count: int, timeout: float) -> list[Any]:
        self.calls.append((count, timeout))
        taken = min(count, self.held)
        self.held -= taken
        return [object()] * taken


@contextlib.contextmanager
def client_with(consume: FakeConsume) -> Iterator[ConsumerClient]:
    """A real client (no broker is contacted) whose librdkafka ``consume`` is ``consume``."""
    client = ConsumerClient({"bootstrap.servers": "127.0.0.1:1", "group.id": "unit"})
    client._consume = consume
    try:
        yield client
    finally:
        client.close()


def test_a_lone_message_is_taken_without_waiting_for_more() -> None:
    consume = FakeConsume(held=1)
    with client_with(consume) as client:
        assert len(client.poll_batch(30.0, 1_000)) == 1
    assert consume.calls == [(1, 30.0), (500, 0)], "only the first message is waited for"


def test_what_is_held_is_drained_in_chunks_up_to_the_limit() -> None:
    consume = FakeConsume(held=1_200)
    with client_with(consume) as client:
        assert len(client.poll_batch(1.0, 1_100)) == 1_100
    assert consume.calls == [(1, 1.0), (500, 0), (500, 0), (99, 0)]


def test_nothing_arrived() -> None:
    consume = FakeConsume(held=0)
    with client_with(consume) as client:
        assert client.poll_batch(0.2, 100) == []
    assert consume.calls == [(1, 0.2)]
