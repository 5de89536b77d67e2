"""``stream_clock``: a clock that tests set and move, read by windows where a message gives no
time (``tick()``, a message produced without a timestamp)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from conveyor.errors import ConfigurationError
from conveyor.state.clock import use_clock

__all__ = ["StreamClock", "stream_clock"]


class StreamClock:
    """The time a test set: :meth:`advance` moves it, and nothing else does."""

    def __init__(self, start: float) -> None:
        self.now = start
        """Seconds since the epoch."""

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float | timedelta) -> None:
        """Move the clock on by ``seconds`` (never back)."""
        step = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if step < 0:
            raise ConfigurationError("a stream clock moves on, not back", "seconds")
        self.now += step


@contextmanager
def stream_clock(start: datetime | float) -> Iterator[StreamClock]:
    """Within the block, windows read time from the clock yielded (``tick()`` closes what it
    says has closed; messages produced without a timestamp carry its time)::

        with testing.stream_clock(datetime(2026, 1, 1, tzinfo=UTC)) as clock:
            testing.produce(consumer, {"page": "/"}, key="user-1")
            testing.consume(consumer)
            clock.advance(60)
            assert consumer.window.tick()   # the minute closed

    Raises:
        ConfigurationError: ``start`` is a naive datetime.
    """
    if isinstance(start, datetime):
        if start.tzinfo is None:
            raise ConfigurationError("stream_clock needs an aware datetime (tzinfo=UTC)", "start")
        start = start.timestamp()
    clock = StreamClock(float(start))
    previous = use_clock(clock)
    try:
        yield clock
    finally:
        use_clock(previous)
