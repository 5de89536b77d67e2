"""The worker pool: ``concurrency`` threads that run jobs from one queue."""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerPool", "run_hook"]

Job = Callable[[], None]

_local = threading.local()


def run_hook(result: Any) -> Any:
    """Finish a hook's result: await it on this worker's own event loop when it is a coroutine."""
    if inspect.isawaitable(result):
        loop = getattr(_local, "loop", None)
        if loop is None:
            loop = _local.loop = asyncio.new_event_loop()
        return loop.run_until_complete(result)
    return result


class WorkerPool:
    """Threads taking jobs from a queue; a job that raises is passed to ``on_crash``.

    Workers block on the queue (no polling); :meth:`stop` wakes each with a sentinel.
    """

    def __init__(self, size: int, name: str, on_crash: Callable[[BaseException], None]) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._on_crash = on_crash
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-worker-{index}", daemon=True)
            for index in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                break
            try:
                job()
            except BaseException as exc:  # a crash must surface, not kill the worker silently
                self._on_crash(exc)
        loop = getattr(_local, "loop", None)
        if loop is not None:
            loop.close()

    def stop(self, timeout: float) -> bool:
        """Let queued jobs finish, then end the threads; return whether all ended in time."""
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)
