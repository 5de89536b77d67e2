"""How a delivery report served on another thread wakes the coroutines that await it.

The thread that serves reports puts each settled future in its loop's :class:`LoopInbox`; the
loop is woken once per bunch (a byte on its self-pipe), not once per report, and settles what
came in one go. Nothing waits in a thread and nothing polls. A report served on the loop's own
thread (:mod:`conveyor.driver.loop_serving`) settles its future there and then."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import Callable

__all__ = ["LoopInbox", "inbox_of", "loop_future", "running_loop", "settle"]

running_loop = asyncio._get_running_loop  # C function: the loop running in this thread or None


class LoopInbox:
    """The futures of one event loop whose results came, handed to the loop in bunches.

    The thread that serves delivery reports puts a settled future here; the loop is woken
    (``call_soon_threadsafe``, a byte on its self-pipe) only when the inbox was empty, and
    settles everything that came meanwhile in one go: with thousands of awaits in flight a
    wake-up per report would cost more than the reports."""

    __slots__ = ("_lock", "_loop", "_scheduled", "_settled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # the inboxes are kept by loop: no reference back
        self._lock = threading.Lock()
        self._settled: deque[asyncio.Future[None]] = deque()
        self._scheduled = False

    def put(self, future: asyncio.Future[None]) -> None:
        """Settle ``future`` on its loop (from another thread: see :func:`settle`)."""
        with self._lock:
            self._settled.append(future)
            if self._scheduled:
                return
            self._scheduled = True
        loop = self._loop()
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits any more
                loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            settled, self._settled = self._settled, deque()
            self._scheduled = False
        for future in settled:
            if not future.done():  # a cancelled await: the delivery went on without it
                future.set_result(None)


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopInbox] = (
    weakref.WeakKeyDictionary()
)


def loop_future() -> tuple[asyncio.Future[None], Callable[[], None]]:
    """A future of the running loop, and the function (safe from any thread) that settles it."""
    future = asyncio.get_running_loop().create_future()
    return future, lambda: settle(future)


def inbox_of(loop: asyncio.AbstractEventLoop) -> LoopInbox:
    """``loop``'s inbox (made on first use, dropped with the loop)."""
    inbox = _inboxes.get(loop)
    if inbox is None:
        inbox = _inboxes.setdefault(loop, LoopInbox(loop))
    return inbox


def settle(future: asyncio.Future[None]) -> None:
    """Settle ``future`` from any thread: at once on its loop's own thread (where a loop that
    serves its producer's reports runs them), else through its loop's inbox."""
    loop = future.get_loop()
    if running_loop() is loop:
        if not future.done():  # a cancelled await: the delivery went on without it
            future.set_result(None)
    else:
        inbox_of(loop).put(future)
