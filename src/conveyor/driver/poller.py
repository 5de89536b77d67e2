"""One background thread per client that serves librdkafka's callbacks, and a way for a
waiting caller to serve them itself.

Delivery reports, errors, statistics, logs and OAuth refreshes are all served by
``poll()``. The poller thread blocks inside librdkafka (GIL released) and wakes the moment
an event is queued, so a waiting caller is woken within microseconds of the report.

Leader and follower: a report served by the poller thread reaches a waiting caller through
two hand-offs between threads (librdkafka wakes the poller, the poller wakes the caller),
where a bare ``flush()`` serves the report in the caller's own thread. So when a poller that
can park (``idle`` given) has nothing in flight, it parks on a condition instead of inside
librdkafka, and a caller that waits for a report may :meth:`Poller.lead`: serve the queue
itself until its report is in. While a leader serves, the poller does not poll; other
waiters follow (their reports are served by the leader, or by the poller once the leader
is done). A parked poller still serves stray events (errors, logs, statistics) every
``_IDLE_SLICE`` seconds, and producers :meth:`~Poller.wake` it when they hand it work.

Backstop: a thread that produces a lot serves queued reports itself as it goes
(:meth:`Poller.note_served`). While it does, the poller parks too and only comes back
``_BACKSTOP`` seconds after the last such serve: otherwise librdkafka wakes it for every
small batch of reports, and each wake-up is a GIL hand-off with the producing thread.

Loop serving: an event loop may serve the queue whenever reports come
(:meth:`Poller.serve_here`, :mod:`conveyor.driver.loop_serving`). While one does, the poller
never waits inside librdkafka, where it would take the loop's reports: it parks and, every
``_LOOP_SLICE``, serves what is queued at that moment (what a blocked loop left).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SERVE_SLICE", "Poller"]

_log = logging.getLogger("conveyor.driver")

# How long one poll() may block when nothing happens; bounds how long stop() takes.
_POLL_SLICE = 0.1
SERVE_SLICE = _POLL_SLICE
"""Seconds within which a report librdkafka queued is served (by the poller, or a leader)."""
# How often a parked poller serves what arrives without a message in flight (errors, logs).
_IDLE_SLICE = 0.1
# How long after another thread served the queue the poller stays out of it.
_BACKSTOP = 0.005
# While an event loop serves the queue: how often the poller serves what the loop left (a
# blocked loop's reports, for threads that do not wait for theirs).
_LOOP_SLICE = 0.01


def _never() -> bool:
    return False


class _Stopped:
    """A stopped poller's client: nothing to serve."""

    def poll(self, timeout: float = 0.0) -> int:
        return 0


class Poller:
    """Serves ``client.poll`` on a daemon thread until :meth:`stop`.

    ``on_served`` is called after every poll that served at least one event (the
    producer uses it to wake threads that wait for room in a full queue).
    ``on_crash`` receives an exception raised out of a callback; the thread goes on.
    ``on_idle`` is called after every poll that served nothing (keep it cheap).
    ``idle`` says whether nothing is in flight (then the poller parks, see the module).
    """

    def __init__(
        self,
        client: Any,
        name: str,
        on_served: Callable[[], None] | None = None,
        on_crash: Callable[[BaseException], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        self._client = client
        self._on_served = on_served
        self._on_crash = on_crash
        self._on_idle = on_idle
        self._idle = idle
        self._running = True
        self._changed = threading.Condition()
        self._leader = False
        self.parked = False
        """Whether the thread waits on its condition rather than inside librdkafka."""
        self._idle_parked = False  # parked because nothing is in flight (wake() ends that)
        self.served_at = -math.inf
        """When another thread last served the queue (``time.monotonic()``; never yet: -inf)."""
        self.loop_serves: Callable[[], bool] = _never
        """Whether an event loop serves the queue as reports come (then the poller only serves,
        now and then, what that loop leaves: see :mod:`conveyor.driver.loop_serving`)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        idle = self._idle
        clock = time.monotonic
        while self._running:
            timeout = _POLL_SLICE
            if idle is not None:
                with self._changed:
                    wait, idling = self._parking(idle, clock())
                    if wait > 0:
                        self.parked = True
                        self._idle_parked = idling
                        try:
                            # Checked again with parked set: a producer that saw parked=False
                            # put its message in before this check, and one that sees
                            # parked=True wakes this wait (it takes the lock to do so).
                            if self._running and self._parking(idle, clock())[0] > 0:
                                self._changed.wait(wait)
                        finally:
                            self.parked = self._idle_parked = False
                        if self._leader or clock() - self.served_at < _BACKSTOP:
                            continue  # someone else serves the queue: stay out
                        timeout = 0.0 if idle() or self.loop_serves() else _POLL_SLICE
            self._serve(timeout)

    def _parking(self, idle: Callable[[], bool], now: float) -> tuple[float, bool]:
        """How long to stay parked from ``now`` (0: poll), and whether for lack of work."""
        if self._leader:
            return _IDLE_SLICE, False
        recent = _BACKSTOP - (now - self.served_at)
        if recent > 0:
            return recent, False
        if idle():
            return _IDLE_SLICE, True
        if self.loop_serves():  # never lie in wait in librdkafka: that would take the loop's
            return _LOOP_SLICE, False  # reports; serve what it left, now and then
        return 0.0, False

    def _serve(self, timeout: float) -> int:
        try:
            served = int(self._client.poll(timeout))
        except Exception as exc:  # a user callback raised: report it, keep serving
            if self._on_crash is not None:
                self._on_crash(exc)
            else:
                _log.exception("a librdkafka callback raised")
            return 0
        if served:
            if self._on_served is not None:
                self._on_served()
        elif self._on_idle is not None:
            self._on_idle()
        return served

    # -- callers ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Work was handed to librdkafka: a poller parked for lack of work goes back to
        polling (one parked as a backstop comes back by itself)."""
        if self._idle_parked:
            with self._changed:
                self._changed.notify_all()

    def serve_here(self) -> int:
        """Serve what is queued now, without waiting, in the calling thread (an event loop
        that serves its producer's reports, see :mod:`conveyor.driver.loop_serving`); the
        poller then stays out of the queue for a moment. Unlike the thread's own polls, it
        never probes a lost connection (that may block)."""
        self.served_at = time.monotonic()
        try:
            served = int(self._client.poll(0))
        except Exception as exc:  # a callback raised: report it, the loop goes on
            if self._on_crash is not None:
                self._on_crash(exc)
            else:
                _log.exception("a librdkafka callback raised")
            return 0
        if served and self._on_served is not None:
            self._on_served()
        return served

    def note_served(self) -> None:
        """Another thread just served the queue: the poller stays out for a moment."""
        self.served_at = time.monotonic()

    def lead(self, done: Callable[[], bool], deadline: float) -> bool:
        """Serve callbacks in the calling thread until ``done()`` or the monotonic ``deadline``,
        if the poller is parked and nobody else leads. Returns False (at once) otherwise: then
        the caller waits for its result as a follower, and the poller or the leader serves it
        (a leader that leaves with work in flight wakes the poller).

        This is the hot path of every ``produce_sync``: plain lock calls, no layers."""
        changed = self._changed
        changed.acquire()
        if not self.parked or self._leader or not self._running:
            changed.release()
            return False
        self._leader = True
        changed.release()
        poll = self._client.poll
        on_served = self._on_served
        clock = time.monotonic
        try:
            while not done():
                remaining = deadline - clock()
                if remaining <= 0:
                    break
                # Only the leader polls now: its own report is served in this very call.
                try:
                    served = poll(remaining if remaining < _POLL_SLICE else _POLL_SLICE)
                except Exception as exc:  # a callback raised: report it, keep serving
                    if self._on_crash is not None:
                        self._on_crash(exc)
                    continue
                if served and on_served is not None:
                    on_served()
        finally:
            self._leader = False
            # Wake the parked poller only if it has work: waking it for nothing cost a GIL
            # hand-off on every call, just as this thread returns to its caller.
            if self._idle is not None and not self._idle():
                changed.acquire()
                changed.notify_all()
                changed.release()
        return True

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the thread after its current poll; safe to call twice or from the thread itself.
        Returns True when the thread has ended: then the poller has let its client go."""
        self._running = False
        with self._changed:
            self._changed.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        self._client = _Stopped()
        return True
