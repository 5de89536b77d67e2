"""The worker pool: ``concurrency`` threads that run jobs from one queue."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from conveyor.hook_results import close_thread_loop

__all__ = ["PoolUsage", "WorkerPool"]

Job = Callable[[], None]


@dataclass(frozen=True)
class PoolUsage:
    """How busy the pool is: ``busy`` threads now, of ``size``; ``queued`` jobs waiting;
    ``busy_seconds`` of work done since the pool started (difference two readings for the
    utilization over an interval). Jobs a listener runs itself (see
    :meth:`WorkerPool.run_here`) count as the pool's work."""

    size: int
    busy: int
    queued: int
    busy_seconds: float

    @property
    def utilization(self) -> float:
        """The share of threads busy right now (0 to 1)."""
        return min(1.0, self.busy / self.size) if self.size else 0.0


class WorkerPool:
    """Threads taking jobs from a queue; a job that raises is passed to ``on_crash``.

    Workers block on the queue (no polling); :meth:`stop` wakes each with a sentinel.
    """

    def __init__(self, size: int, name: str, on_crash: Callable[[BaseException], None]) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._on_crash = on_crash
        self.size = size
        # Per worker: when its current job started (None when idle) and its busy seconds so far.
        # One slot per thread, each written only by its own thread: no lock on the job path.
        self._busy_since: list[float | None] = [None] * size
        self._busy_total = [0.0] * size
        # The same for jobs run by other threads (listeners), one key per thread: each key is
        # written only by its own thread.
        self._here_since: dict[int, float | None] = {}
        self._here_total: dict[int, float] = {}
        self._threads = [
            threading.Thread(
                target=self._work, args=(index,), name=f"{name}-worker-{index}", daemon=True
            )
            for index in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def run_here(self, job: Job) -> None:
        """Run ``job`` on the calling thread (a listener running a quick batch itself), counted
        in the pool's usage like a worker's job. What it raises propagates."""
        thread = threading.get_ident()
        self._here_since[thread] = started = time.perf_counter()
        try:
            job()
        finally:
            self._here_total[thread] = (
                self._here_total.get(thread, 0.0) + time.perf_counter() - started
            )
            self._here_since[thread] = None

    def _work(self, index: int) -> None:
        jobs = self._jobs
        since = self._busy_since
        total = self._busy_total
        clock = time.perf_counter
        while True:
            job = jobs.get()
            if job is None:
                break
            since[index] = started = clock()
            try:
                job()
            except BaseException as exc:  # a crash must surface, not kill the worker silently
                self._on_crash(exc)
            finally:
                total[index] += clock() - started
                since[index] = None
        close_thread_loop()

    def usage(self) -> PoolUsage:
        """A reading of how busy the pool is (safe from any thread)."""
        now = time.perf_counter()
        starts = [*self._busy_since, *list(self._here_since.values())]
        running = [now - start for start in starts if start is not None]
        return PoolUsage(
            size=self.size,
            busy=len(running),
            queued=self._jobs.qsize(),
            busy_seconds=sum(self._busy_total)
            + sum(list(self._here_total.values()))
            + sum(running),
        )

    def stop(self, timeout: float) -> bool:
        """Let queued jobs finish, then end the threads; return whether all ended in time."""
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)
