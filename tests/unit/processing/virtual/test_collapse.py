"""A partition's collapse after a failure: failures that wait merge, a collapse runs through
the last offset handed out (never less than one before it) and retries what did not finish."""

from __future__ import annotations

from conveyor.processing.virtual.collapse import Collapse, Failure
from conveyor.processing.virtual.tracker import OffsetTracker


def tracker_with(*offsets: int, finished: tuple[int, ...] = ()) -> OffsetTracker:
    tracker = OffsetTracker()
    for offset in offsets:
        tracker.hand_out(offset, f"m{offset}")
    for offset in finished:
        tracker.finish(offset)
    return tracker


def test_failures_that_wait_take_the_longer_back_off_and_the_later_offset() -> None:
    collapse = Collapse()
    first, second = ValueError("lane 1"), ValueError("lane 2")
    collapse.fail(Failure(2.0, 5, first))
    collapse.fail(Failure(1.0, 9, second))
    assert collapse.failure == Failure(2.0, 9, first)
    assert collapse.until is None, "not collapsed while the lanes finish"


def test_a_collapse_runs_what_did_not_finish_through_the_last_offset_handed_out() -> None:
    collapse = Collapse()
    collapse.fail(Failure(1.0, 3, ValueError("lane")))
    failure, redo = collapse.begin(tracker_with(2, 3, 4, 5, finished=(2, 4)), False)
    assert failure.delay == 1.0
    assert redo == ["m3", "m5"]
    assert collapse.until == 5
    assert collapse.failure is None


def test_retry_finished_lanes_runs_what_other_lanes_finished_again() -> None:
    collapse = Collapse()
    collapse.fail(Failure(0.0, 3, ValueError("lane")))
    _, redo = collapse.begin(tracker_with(2, 3, 4, finished=(2, 4)), True)
    assert redo == ["m3", "m4"]


def test_a_failure_while_collapsed_never_shortens_the_collapse() -> None:
    collapse = Collapse()
    collapse.until = 20
    collapse.fail(Failure(0.0, 3, ValueError("again")))
    collapse.begin(tracker_with(3, 4), False)
    assert collapse.until == 20
    collapse.forget()
    assert (collapse.failure, collapse.until) == (None, None)
