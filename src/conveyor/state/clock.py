"""The wall clock that windows read where a message gives no time: ``tick()`` without
``now``, and a message without a timestamp. ``conveyor.testing.stream_clock`` sets it in
tests, so that a window's closing can be stepped through without waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["record_time", "use_clock", "wall_clock"]

_source: Callable[[], float] = time.time


def wall_clock() -> float:
    """Seconds since the epoch, as the clock in use tells them (``time.time`` by default)."""
    return _source()


def record_time(raw: Any) -> int:
    """A record's timestamp in milliseconds (librdkafka's ``timestamp()``), the wall clock
    when it has none: the time windows and joins go by."""
    kind, milliseconds = raw.timestamp()
    return int(milliseconds) if kind else round(_source() * 1000)


def use_clock(source: Callable[[], float] | None) -> Callable[[], float]:
    """Read time from ``source`` from now on (``None``: ``time.time`` again); returns the
    clock used until now."""
    global _source
    previous, _source = _source, source or time.time
    return previous
