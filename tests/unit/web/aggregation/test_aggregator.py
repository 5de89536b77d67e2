"""The aggregator's loop, without a broker: it publishes at its first look, however young the
machine's clock."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from conveyor.web.aggregation import aggregator as aggregator_module
from conveyor.web.aggregation.aggregator import Aggregator
from conveyor.web.topics import WebTopics

if TYPE_CHECKING:
    from unit.conftest import YoungClock


class QuietClient:
    """A consumer that is assigned nothing and reads nothing."""

    def __init__(self, settings: Any, on_fetch_error: Any = None) -> None:
        self.stopped = threading.Event()

    def subscribe(self, topics: list[str], *callbacks: Any) -> None: ...

    def poll_batch(self, timeout: float, count: int) -> list[Any]:
        self.stopped.wait(0.01)
        return []

    def close(self) -> None: ...


def test_the_first_flush_comes_at_the_first_look_on_a_machine_booted_just_now(
    monkeypatch: pytest.MonkeyPatch, young_clock: YoungClock
) -> None:
    young_clock.seen_by(aggregator_module)
    monkeypatch.setattr(aggregator_module, "ConsumerClient", QuietClient)
    nothing: Any = None  # a producer it never uses here (it owns no partition)
    aggregator = Aggregator({}, producer=nothing, topics=WebTopics(), flush_interval=3600.0)
    flushed = threading.Event()
    monkeypatch.setattr(aggregator, "_flush", lambda client: flushed.set())
    aggregator.start()
    try:
        assert flushed.wait(5), "not flushed until the machine has been up for an interval"
    finally:
        aggregator.stop(5)
    assert aggregator.error is None
