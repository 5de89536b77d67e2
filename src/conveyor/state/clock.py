"""The wall clock that windows read where a message gives no time: ``tick()`` without
``now``, and a message without a timestamp. ``conveyor.testing.stream_clock`` sets it in
tests, so that a window's closing can be stepped through without waiting."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["use_clock", "wall_clock"]

_source: Callable[[], float] = time.time


def wall_clock() -> float:
    """Seconds since the epoch, as the clock in use tells them (``time.time`` by default)."""
    return _source()


def use_clock(source: Callable[[], float] | None) -> Callable[[], float]:
    """Read time from ``source`` from now on (``None``: ``time.time`` again); returns the
    clock used until now."""
    global _source
    previous, _source = _source, source or time.time
    return previous
