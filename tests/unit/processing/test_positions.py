"""Where an assigned partition starts: its committed offset, the initial offset only when the
group has none, and never the initial offset because the committed one could not be read."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import pytest

from conveyor.driver.consumers import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    Committed,
    Partition,
)
from conveyor.errors import ConveyorError, KafkaError
from conveyor.processing.positions import StartAbandoned, StartPositions, initial_position


class Broker:
    """Answers ``committed`` from ``offsets`` (an offset, or an offset and its metadata),
    after failing with each of ``failures`` first."""

    def __init__(
        self, offsets: dict[Partition, int | Committed], failures: Iterable[str] = ()
    ) -> None:
        self.offsets = {
            key: found if isinstance(found, Committed) else Committed(found, None)
            for key, found in offsets.items()
        }
        self.failures = list(failures)
        self.asks: list[float] = []
        self.on_ask: Callable[[], None] = lambda: None

    def committed(
        self, partitions: Iterable[Partition], timeout: float
    ) -> dict[Partition, Committed]:
        self.asks.append(timeout)
        self.on_ask()
        if self.failures:
            name = self.failures.pop(0)
            raise KafkaError(f"committed offsets: {name}", name=name)
        return {p: self.offsets[p] for p in partitions if p in self.offsets}


def positions(
    broker: Broker, budget: float = 30.0, stopping: threading.Event | None = None
) -> tuple[StartPositions, list[str], list[str]]:
    stalls: list[str] = []
    errors: list[str] = []
    resolver = StartPositions(
        broker,
        OFFSET_BEGINNING,
        budget=budget,
        on_stall=lambda: stalls.append("fence"),
        on_error=lambda error: errors.append(str(error.name)),
        stopping=stopping or threading.Event(),
    )
    return resolver, stalls, errors


def test_a_committed_offset_wins_and_only_a_partition_without_one_starts_at_the_initial() -> None:
    resolver, stalls, errors = positions(Broker({("t", 0): 2801, ("t", 1): 0}))
    assert resolver.resolve([("t", 0), ("t", 1), ("t", 2)], "g") == (
        [("t", 0, 2801), ("t", 1, 0), ("t", 2, OFFSET_BEGINNING)],
        {},
    )
    assert (stalls, errors) == ([], [])


def test_the_metadata_committed_with_an_offset_comes_with_the_start_positions() -> None:
    """What a consumer reads as ``offset_metadata`` after the assignment."""
    broker = Broker({("t", 0): Committed(7, "cursor=42"), ("t", 1): Committed(3, None)})
    resolver, _, _ = positions(broker)
    assert resolver.resolve([("t", 0), ("t", 1), ("t", 2)], "g") == (
        [("t", 0, 7), ("t", 1, 3), ("t", 2, OFFSET_BEGINNING)],
        {("t", 0): "cursor=42"},
    )


def test_an_unanswered_ask_is_asked_again_and_the_first_timeout_fences_once() -> None:
    broker = Broker({("t", 2): 2801}, failures=["_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT"])
    resolver, stalls, errors = positions(broker)
    assert resolver.resolve([("t", 2)], "g") == ([("t", 2, 2801)], {})
    assert stalls == ["fence"]
    assert errors == ["_TIMED_OUT", "_TRANSPORT"], "the first timeout fences: not an error yet"
    assert len(broker.asks) == 4


def test_offsets_that_stay_unknown_stop_the_listener_instead_of_reading_again() -> None:
    broker = Broker({("t", 2): 2801}, failures=["_TRANSPORT"] * 1000)
    resolver, _, _ = positions(broker, budget=0.0)
    with pytest.raises(ConveyorError, match=r"t/2 stayed unknown .* not starting them"):
        resolver.resolve([("t", 2)], "g")


def test_a_stop_during_an_unanswered_ask_ends_the_read_without_asking_again() -> None:
    stopping = threading.Event()
    broker = Broker({("t", 2): 2801}, failures=["_TIMED_OUT"] * 1000)
    broker.on_ask = stopping.set  # the app stops while the ask waits
    resolver, _, errors = positions(broker, stopping=stopping)
    with pytest.raises(StartAbandoned, match=r"g: stopped while reading .* of t/2"):
        resolver.resolve([("t", 2)], "g")
    assert (len(broker.asks), errors) == (1, [])


def test_a_closed_client_ends_the_read() -> None:
    """The app's shutdown closed the client under the ask: asking again cannot succeed."""
    broker = Broker({("t", 2): 2801}, failures=["_DESTROY"] * 1000)
    resolver, _, errors = positions(broker)
    with pytest.raises(StartAbandoned, match="_DESTROY"):
        resolver.resolve([("t", 2)], "g")
    assert (len(broker.asks), errors) == (1, [])


def test_a_stopped_listener_does_not_start_asking() -> None:
    stopping = threading.Event()
    stopping.set()
    broker = Broker({("t", 2): 2801})
    resolver, _, _ = positions(broker, stopping=stopping)
    with pytest.raises(
        StartAbandoned, match=r"stopped while reading the committed offsets of t/2$"
    ):
        resolver.resolve([("t", 2)], "g")
    assert broker.asks == []


def test_an_ask_refused_at_once_is_asked_again_after_a_pause_not_in_a_busy_loop() -> None:
    stopping = threading.Event()
    broker = Broker({("t", 2): 2801}, failures=["_TRANSPORT"] * 100_000)
    broker.on_ask = lambda: len(broker.asks) == 3 and stopping.set()  # stops at the third
    resolver, _, _ = positions(broker, stopping=stopping)
    started = time.monotonic()
    with pytest.raises(StartAbandoned):
        resolver.resolve([("t", 2)], "g")
    assert len(broker.asks) == 3
    assert time.monotonic() - started >= 0.9, "half a second between refusals, not a busy loop"


def test_each_start_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    resolver, _, _ = positions(Broker({("t", 0): 5}))
    with caplog.at_level(logging.DEBUG, logger="conveyor.positions"):
        resolver.resolve([("t", 0), ("t", 1)], "g")
    assert "g: t/0 starts at committed offset 5" in caplog.text
    assert "g: t/1 starts at no committed offset: initial earliest" in caplog.text


def test_initial_positions_follow_auto_offset_reset() -> None:
    assert initial_position("earliest") == initial_position("smallest") == OFFSET_BEGINNING
    assert initial_position("latest") == initial_position("largest") == OFFSET_END
    assert initial_position("error") == OFFSET_STORED
