"""The worker pool runs jobs on its threads, reports crashes, and tells how busy it is."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from conveyor.hook_results import run_hook
from conveyor.processing import workers as workers_module
from conveyor.processing.workers import WorkerPool

if TYPE_CHECKING:
    from unit.conftest import YoungClock


def test_jobs_run_in_parallel_on_the_pool() -> None:
    """Two jobs that wait for each other can only finish on two threads at once."""
    pool = WorkerPool(2, "unit", lambda error: None)
    barrier = threading.Barrier(2, timeout=5)
    finished: list[int] = []
    try:
        for n in range(2):
            pool.submit(lambda n=n: (barrier.wait(), finished.append(n)))
        assert pool.stop(5)
    finally:
        pool.stop(1)
    assert sorted(finished) == [0, 1]


def test_a_crashing_job_is_reported_and_the_worker_goes_on() -> None:
    crashes: list[BaseException] = []
    pool = WorkerPool(1, "unit", crashes.append)
    after = threading.Event()
    pool.submit(lambda: 1 / 0)  # type: ignore[func-returns-value]
    pool.submit(after.set)
    assert after.wait(5)
    assert pool.stop(5)
    assert [type(error) for error in crashes] == [ZeroDivisionError]


def test_usage_counts_busy_workers_and_busy_time() -> None:
    pool = WorkerPool(3, "unit", lambda error: None)
    started = threading.Barrier(3, timeout=5)
    release = threading.Event()
    try:
        for _ in range(2):
            pool.submit(lambda: (started.wait(), release.wait(5)))
        started.wait()
        usage = pool.usage()
        assert (usage.size, usage.busy) == (3, 2)
        assert abs(usage.utilization - 2 / 3) < 1e-9
        release.set()
    finally:
        release.set()
        assert pool.stop(5)
    idle = pool.usage()
    assert idle.busy == 0
    assert idle.busy_seconds > 0


def test_a_job_run_here_counts_as_the_pools_work() -> None:
    """A listener running a quick batch itself: busy while it runs, its time in busy_seconds,
    on the calling thread, and what it raises reaches the caller."""
    pool = WorkerPool(2, "unit", lambda error: None)
    seen: list[tuple[int, int]] = []
    try:
        before = pool.usage().busy_seconds
        pause = threading.Event()
        pool.run_here(
            lambda: (seen.append((threading.get_ident(), pool.usage().busy)), pause.wait(0.05))
        )
        assert seen == [(threading.get_ident(), 1)], "on this thread, counted busy meanwhile"
        after = pool.usage()
        assert after.busy == 0
        assert after.busy_seconds - before >= 0.05
        with pytest.raises(ZeroDivisionError):
            pool.run_here(lambda: 1 / 0)  # type: ignore[func-returns-value]
        assert pool.usage().busy == 0, "not left busy after it raised"
    finally:
        assert pool.stop(5)


def test_a_job_that_starts_at_the_clocks_zero_counts_as_busy(young_clock: YoungClock) -> None:
    """A start read as exactly 0.0 is a start (0.0 is no "idle")."""
    young_clock.seen_by(workers_module).freeze(0.0)
    pool = WorkerPool(1, "unit", lambda error: None)
    started, release = threading.Event(), threading.Event()
    busy: list[int] = []
    try:
        pool.run_here(lambda: busy.append(pool.usage().busy))
        pool.submit(lambda: (started.set(), release.wait(5)))
        assert started.wait(5)
        busy.append(pool.usage().busy)
    finally:
        release.set()
        assert pool.stop(5)
    assert busy == [1, 1], "busy on the calling thread, then on the worker"


def test_async_hooks_run_on_the_workers_own_loop() -> None:
    async def answer() -> int:
        return 42

    assert run_hook(answer()) == 42
    assert run_hook(7) == 7
