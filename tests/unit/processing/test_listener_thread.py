"""The listener's thread without a broker: commands run on it in order (one from another
thread ends the poll's wait), a call waits for its result, and a batch that holds the thread
hands the listener's role to another."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from conveyor.errors import KafkaError
from conveyor.processing import listener_thread as thread_module
from conveyor.processing.listener_thread import HandedOver, ListenerThread
from conveyor.processing.timers import Timers

if TYPE_CHECKING:
    from unit.conftest import YoungClock


class Role:
    """A ListenerThread whose wakes and reports are recorded; the test's thread holds it."""

    def __init__(self, timers: Timers) -> None:
        self.wakes = 0
        self.reports: list[KafkaError] = []
        self.thread = ListenerThread(
            "unit",
            lambda: None,  # a successor: nothing to poll here
            wake=self.wake,
            report=self.reports.append,
            timers=timers,
            stopping=threading.Event(),
            call_wait=0.2,
        )
        self.thread.current = threading.current_thread()

    def wake(self) -> None:
        self.wakes += 1


@pytest.fixture
def role() -> Iterator[Role]:
    timers = Timers("unit")
    try:
        yield Role(timers)
    finally:
        timers.stop()


def test_commands_run_in_order_and_one_that_raises_is_reported(role: Role) -> None:
    ran: list[int] = []

    def fails() -> None:
        raise ValueError("no")

    role.thread.command(lambda: ran.append(1))
    role.thread.command(fails)
    role.thread.command(lambda: ran.append(3))
    assert role.wakes == 0, "queued on the listener's own thread: nothing to wake"
    role.thread.run_commands()
    assert ran == [1, 3]
    [report] = role.reports
    assert "listener command failed: no" in str(report)


def test_a_command_from_another_thread_ends_the_polls_wait(role: Role) -> None:
    other = threading.Thread(target=role.thread.command, args=(lambda: None,))
    other.start()
    other.join(10)
    assert role.wakes == 1
    assert len(role.thread.commands) == 1


def test_a_call_runs_at_once_on_the_listeners_thread_and_waits_elsewhere(role: Role) -> None:
    assert role.thread.call(lambda: 42) == 42
    answers: list[Any] = []
    other = threading.Thread(target=lambda: answers.append(role.thread.call(lambda: 43, 10.0)))
    other.start()
    while not role.thread.commands:
        other.join(0.01)
    role.thread.run_commands()
    other.join(10)
    assert answers == [43]
    late = threading.Thread(target=lambda: answers.append(role.thread.call(lambda: 44)))
    late.start()
    late.join(10)
    assert answers == [43, None], "not run within call_wait: no answer"


def test_a_batch_begun_at_the_clocks_zero_is_taken_over(
    role: Role, young_clock: YoungClock
) -> None:
    """A batch on the listener's thread whose start read exactly 0.0 is a batch like any other
    (0.0 is no "none runs"): held long enough, another thread takes the listener's role."""
    young_clock.seen_by(thread_module).freeze(0.0)

    def held_batch() -> None:
        young_clock.freeze(thread_module.TAKE_OVER_AFTER)
        role.thread._watch()

    with pytest.raises(HandedOver):
        role.thread.run_here(held_batch)
    assert role.thread.current is not threading.current_thread()
