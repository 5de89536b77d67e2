"""``Linger``: a lane that waits for a fuller batch (the route's ``linger``): it runs once it
holds ``max_messages`` or its oldest waiting message waited ``linger`` seconds; a timer wakes
the partition when the first waiting lane is due. Used under the partition's lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.processing.timers import Timer, Timers
    from conveyor.processing.virtual.lane import Lane

__all__ = ["Linger"]


class Linger:
    """When a partition's lanes are ready to run (see the module); ``wake`` hands out again
    once a waiting lane is due."""

    def __init__(
        self,
        seconds: float,
        max_messages: int,
        timers: Timers,
        lock: threading.Lock,
        wake: Callable[[], None],
    ) -> None:
        self.seconds = seconds
        self._max_messages = max_messages
        self._timers = timers
        self._lock = lock
        self._wake = wake
        self._timer: Timer | None = None
        self._due = 0.0

    def ready(self, lane: Lane, now: float) -> bool:
        """Whether ``lane`` has a full batch or waited long enough (``now``: monotonic)."""
        return len(lane.queue) >= self._max_messages or now - lane.since >= self.seconds

    def ready_lanes(self, lanes: list[Lane]) -> list[Lane]:
        """The lanes of ``lanes`` ready to run; a timer wakes the others when they are due."""
        now = time.monotonic()
        ready = [lane for lane in lanes if self.ready(lane, now)]
        if len(ready) < len(lanes):
            due = min(lane.since for lane in lanes if lane not in ready) + self.seconds
            timer = self._timer
            if timer is None or due < self._due:
                if timer is not None:
                    timer.cancel()
                self._due = due
                self._timer = self._timers.call_later(max(0.0, due - now), self._lingered_out)
        return ready

    def _lingered_out(self) -> None:
        with self._lock:
            self._timer = None
        self._wake()
