"""One scheduler thread runs delayed actions in deadline order; cancelled ones never run."""

from __future__ import annotations

import threading

from conveyor.processing.timers import Timers


def test_actions_run_in_deadline_order_not_call_order() -> None:
    timers = Timers("unit")
    ran: list[str] = []
    done = threading.Event()
    try:
        timers.call_later(0.15, lambda: (ran.append("late"), done.set()))
        timers.call_later(0.05, lambda: ran.append("early"))
        assert done.wait(5)
        assert ran == ["early", "late"]
    finally:
        timers.stop()


def test_a_cancelled_timer_never_runs() -> None:
    """A positive marker scheduled after the cancelled one proves it had its chance."""
    timers = Timers("unit")
    ran: list[str] = []
    marker = threading.Event()
    try:
        timer = timers.call_later(0.05, lambda: ran.append("cancelled"))
        timer.cancel()
        timers.call_later(0.1, marker.set)
        assert marker.wait(5)
        assert ran == []
        assert timers.pending() == 0
    finally:
        timers.stop()


def test_a_failing_action_does_not_stop_the_others() -> None:
    timers = Timers("unit")
    marker = threading.Event()
    try:
        timers.call_later(0.01, lambda: 1 / 0)  # type: ignore[func-returns-value]
        timers.call_later(0.05, marker.set)
        assert marker.wait(5)
    finally:
        timers.stop()


def test_stop_drops_what_is_scheduled() -> None:
    timers = Timers("unit")
    ran: list[int] = []
    timers.call_later(0.05, lambda: ran.append(1))
    timers.stop()
    late = timers.call_later(0.0, lambda: ran.append(2))
    assert late.cancelled
    assert timers.pending() == 0
    assert ran == []
