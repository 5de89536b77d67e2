"""The consumer client's adaptive batching, without a broker: block for the first message
only, then take what librdkafka already holds without waiting; a first message that came
after a wait is handed on alone at once.

The client's clock is a fake one: time passes only when a fake ``consume`` says it waited,
so that a busy machine cannot make an immediate answer look like a wait."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from conveyor.driver import consumers
from conveyor.driver.consumers import ConsumerClient


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(consumers, "_clock", fake)
    return fake


class FakeConsume:
    """Stands in for librdkafka's ``consume(num_messages, timeout)``: hands out what it holds
    and records each call."""

    def __init__(self, held: int, clock: Clock | None = None, waits: float = 0.0) -> None:
        self.held = held
        self.calls: list[tuple[int, float]] = []
        self.clock = clock
        self.waits = waits  # how long the first call waits for its message

    def __call__(self, count: int, timeout: float) -> list[Any]:
        if self.clock is not None and not self.calls:
            self.clock.now += self.waits
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


def test_a_message_that_came_after_a_wait_is_handed_on_alone(clock: Clock) -> None:
    """What was fetched with it (a burst) waits for the next poll, which takes it at once."""
    consume = FakeConsume(held=300, clock=clock, waits=0.05)
    with client_with(consume) as client:
        assert len(client.poll_batch(1.0, 1_000)) == 1
        assert consume.calls == [(1, 1.0)], "no second call into librdkafka"
        assert len(client.poll_batch(1.0, 1_000)) == 299
    assert consume.calls[1:] == [(1, 1.0), (500, 0)]


def test_a_short_wait_still_drains(clock: Clock) -> None:
    consume = FakeConsume(held=20, clock=clock, waits=consumers._WAITED / 2)
    with client_with(consume) as client:
        assert len(client.poll_batch(1.0, 1_000)) == 20
