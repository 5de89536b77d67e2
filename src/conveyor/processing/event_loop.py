"""``EventLoopThread``: the app's asyncio event loop, on a thread of its own, started the first
time a coroutine is submitted (lanes of an ``async def consume()`` run on it concurrently).

Every coroutine on it shares one thread: a lane that blocks (a ``time.sleep``, a synchronous
call) stalls every other lane of every partition. A watchdog says so: the loop stamps a pulse
every ``blocked_after / 4`` seconds, and when the pulse is older than ``blocked_after`` the
watchdog reports ``on_blocked(task, seconds)`` once for that stall, naming the task that holds
the loop (a lane: its topic, partition and number).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["EventLoopThread"]


class EventLoopThread:
    """One asyncio loop on a daemon thread; a coroutine that raises is passed to ``on_crash``;
    a callback that holds the loop past ``blocked_after`` seconds is told to ``on_blocked``."""

    def __init__(
        self,
        name: str,
        on_crash: Callable[[BaseException], None],
        on_blocked: Callable[[str, float], None] | None = None,
        blocked_after: float | None = None,
    ) -> None:
        self._name = name
        self._on_crash = on_crash
        self._on_blocked = on_blocked
        self._blocked_after = blocked_after
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pulse = time.monotonic()
        self._stopped = threading.Event()

    def submit(self, coroutine: Coroutine[Any, Any, None], name: str = "") -> None:
        """Run ``coroutine`` on the loop (started now if it is not running yet), as a task
        called ``name`` (what a report of a blocked loop names)."""
        future = asyncio.run_coroutine_threadsafe(_named(coroutine, name), self._running_loop())
        future.add_done_callback(self._check)

    def call(self, coroutine: Coroutine[Any, Any, None], timeout: float) -> None:
        """Run ``coroutine`` on the loop and wait for it (at most ``timeout`` seconds); it
        raises what the coroutine raised."""
        asyncio.run_coroutine_threadsafe(coroutine, self._running_loop()).result(timeout)

    def _check(self, future: concurrent.futures.Future[None]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self._on_crash(error)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"{self._name}-event-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                if self._blocked_after is not None and self._on_blocked is not None:
                    self._watch(loop, self._blocked_after, self._on_blocked)
            return self._loop

    def _watch(
        self,
        loop: asyncio.AbstractEventLoop,
        blocked_after: float,
        on_blocked: Callable[[str, float], None],
    ) -> None:
        every = blocked_after / 4

        def pulse() -> None:  # on the loop: a late pulse is a loop held by someone
            self._pulse = time.monotonic()
            if not self._stopped.is_set():
                loop.call_later(every, pulse)

        def watch() -> None:  # on a thread of its own: it must see the loop when it is stuck
            reported: float | None = None  # the pulse of the stall told already
            while not self._stopped.wait(every):
                last = self._pulse
                held = time.monotonic() - last
                if held > blocked_after and last != reported:
                    reported = last
                    task = asyncio.current_task(loop)
                    on_blocked(task.get_name() if task is not None else "a callback", held)

        self._pulse = time.monotonic()
        loop.call_soon_threadsafe(pulse)
        threading.Thread(target=watch, name=f"{self._name}-loop-watchdog", daemon=True).start()

    def stop(self, timeout: float) -> bool:
        """Stop the loop after what it runs now; True when its thread ended in time."""
        self._stopped.set()
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return True
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if thread.is_alive():
            return False
        loop.close()
        return True


async def _named(coroutine: Coroutine[Any, Any, None], name: str) -> None:
    task = asyncio.current_task()
    if name and task is not None:
        task.set_name(name)
    await coroutine
