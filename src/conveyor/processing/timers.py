"""``Timers``: one thread that runs delayed actions (retry back-offs, timed pauses) on time.

A paused partition used to get a ``threading.Timer`` (a thread) of its own; with many
partitions failing at once that is many threads sleeping. One scheduler thread waits on a
condition until the earliest deadline (or until a nearer one is added) and runs what is due.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

__all__ = ["Timer", "Timers"]

_log = logging.getLogger("conveyor.processing")


class Timer:
    """A scheduled action; :meth:`cancel` stops it from running (if it has not run yet)."""

    __slots__ = ("action", "cancelled", "deadline")

    def __init__(self, deadline: float, action: Callable[[], None]) -> None:
        self.deadline = deadline
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    """Runs actions after a delay on one daemon thread (started on first use).

    Actions must be short: they run one after another on the scheduler's thread. One that
    raises is logged and the others still run.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._due: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def call_later(self, delay: float, action: Callable[[], None]) -> Timer:
        """Run ``action`` after ``delay`` seconds; returns its :class:`Timer`."""
        timer = Timer(time.monotonic() + max(0.0, delay), action)
        with self._changed:
            if self._stopped:
                timer.cancelled = True
                return timer
            heapq.heappush(self._due, (timer.deadline, next(self._order), timer))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"{self._name}-timers", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        return timer

    def pending(self) -> int:
        """Timers not yet run nor cancelled."""
        with self._changed:
            return sum(1 for _, _, timer in self._due if not timer.cancelled)

    def stop(self) -> None:
        """Drop what is scheduled and end the thread."""
        with self._changed:
            self._stopped = True
            for _, _, timer in self._due:
                timer.cancelled = True
            self._due.clear()
            self._changed.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while True:
            with self._changed:
                while True:
                    if self._stopped:
                        return
                    if self._due:
                        wait = self._due[0][0] - time.monotonic()
                        if wait <= 0:
                            timer = heapq.heappop(self._due)[2]
                            break
                        self._changed.wait(wait)
                    else:
                        self._changed.wait()
            if timer.cancelled:
                continue
            try:
                timer.action()
            except Exception:
                _log.exception("a scheduled action failed")
