"""Which partitions tick: each on its own once idle for max_wait_time (no broker)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from conveyor import Consumer
from conveyor.processing.idle_ticks import IdleTicks, ticks


class _Executor:
    def __init__(self) -> None:
        self.fed = 0
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1


def _check(clock: IdleTicks, executors: dict[Any, _Executor], now: float) -> None:
    clock.check(executors, executors.get, now)  # type: ignore[arg-type]


def test_a_busy_partition_does_not_hold_back_its_idle_sibling() -> None:
    busy, idle = _Executor(), _Executor()
    executors = {("t", 0): busy, ("t", 1): idle}
    clock = IdleTicks(1.0)
    for step in range(21):  # 5 s in checks a quarter of max_wait_time apart
        busy.fed += 1
        _check(clock, executors, step * 0.25)
    assert busy.ticks == 0
    assert idle.ticks == 5  # at 1.0, 2.0 ... 5.0: once per max_wait_time


def test_a_tick_comes_a_whole_max_wait_time_after_the_last_message() -> None:
    executor = _Executor()
    executors = {("t", 0): executor}
    clock = IdleTicks(1.0)
    _check(clock, executors, 0.0)
    executor.fed += 1
    _check(clock, executors, 0.9)  # a message came: the wait starts again
    _check(clock, executors, 1.85)
    assert executor.ticks == 0
    _check(clock, executors, 1.95)
    assert executor.ticks == 1
    assert clock.next_check == 1.95 + 0.25


def test_a_partition_no_longer_assigned_is_forgotten() -> None:
    executor = _Executor()
    clock = IdleTicks(1.0)
    _check(clock, {("t", 0): executor}, 0.0)
    _check(clock, {}, 0.5)
    _check(clock, {("t", 0): executor}, 1.2)  # assigned again: its wait starts now
    assert executor.ticks == 0


def test_only_routes_whose_consumer_defines_tick_tick() -> None:
    class Plain(Consumer):
        def consume(self) -> None:
            return None

    class Periodic(Plain):
        def tick(self) -> None:
            return None

    assert not ticks(SimpleNamespace(consumer_class=Plain))  # type: ignore[arg-type]
    assert ticks(SimpleNamespace(consumer_class=Periodic))  # type: ignore[arg-type]
    assert not ticks(None)
