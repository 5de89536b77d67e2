"""``EventLoopThread``: the app's asyncio event loop, on a thread of its own, started the first
time a coroutine is submitted (lanes of an ``async def consume()`` run on it concurrently)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["EventLoopThread"]


class EventLoopThread:
    """One asyncio loop on a daemon thread; a coroutine that raises is passed to ``on_crash``."""

    def __init__(self, name: str, on_crash: Callable[[BaseException], None]) -> None:
        self._name = name
        self._on_crash = on_crash
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def submit(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` on the loop (started now if it is not running yet)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())
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
            return self._loop

    def stop(self, timeout: float) -> bool:
        """Stop the loop after what it runs now; True when its thread ended in time."""
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
