"""A plain job past its time limit is interrupted in its own thread, inside the guarded
block; a job that ends in time is never interrupted, even right at its limit."""

from __future__ import annotations

import threading
import time

import pytest

from conveyor.jobs import JobTimeoutError
from conveyor.jobs.watchdog import Watchdog


def _spin(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # Python code: interruptible
        pass


def test_a_job_past_its_limit_is_interrupted_in_its_thread() -> None:
    watchdog = Watchdog()
    started = time.monotonic()
    with pytest.raises(JobTimeoutError):
        _guarded(watchdog, 0.2, 10)
    assert time.monotonic() - started < 5


def _guarded(watchdog: Watchdog, limit: float, work: float) -> None:
    with watchdog.guard(limit):
        _spin(work)


def test_an_interrupt_never_lands_outside_a_guard() -> None:
    """Jobs ending right around their limit, many times: each is interrupted inside its
    guard or not at all; none lands after it (here, in the loop or the sleep)."""
    watchdog = Watchdog()
    outcomes = []
    for _ in range(300):
        try:
            _guarded(watchdog, 0.001, 0.0009)
            outcomes.append("done")
        except JobTimeoutError:
            outcomes.append("interrupted")
    time.sleep(0.05)
    _spin(0.05)
    assert len(outcomes) == 300
    assert "done" in outcomes


def test_each_thread_gets_its_own_limit() -> None:
    watchdog = Watchdog()
    outcomes: dict[str, str] = {}

    def run(name: str, limit: float, work: float) -> None:
        try:
            with watchdog.guard(limit):
                deadline = time.monotonic() + work
                while time.monotonic() < deadline:
                    pass
            outcomes[name] = "done"
        except JobTimeoutError:
            outcomes[name] = "interrupted"

    threads = [threading.Thread(target=run, args=("slow", 0.1, 5.0)),
               threading.Thread(target=run, args=("quick", 5.0, 0.2))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert outcomes == {"slow": "interrupted", "quick": "done"}
