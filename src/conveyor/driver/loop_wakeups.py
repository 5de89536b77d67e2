"""How a delivery report served on another thread wakes the coroutines that await it.

The thread that serves reports puts each settled future in its loop's :class:`LoopInbox`; the
loop is woken once per bunch (a byte on its self-pipe), not once per report, and settles what
came in one go. Nothing waits in a thread and nothing polls."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import Callable

__all__ = ["LoopInbox", "inbox_of", "loop_future"]


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
        """Settle ``future`` on its loop (from any thread)."""
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
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    put = inbox_of(loop).put
    return future, lambda: put(future)


def inbox_of(loop: asyncio.AbstractEventLoop) -> LoopInbox:
    """``loop``'s inbox (made on first use, dropped with the loop)."""
    inbox = _inboxes.get(loop)
    if inbox is None:
        inbox = _inboxes.setdefault(loop, LoopInbox(loop))
    return inbox
