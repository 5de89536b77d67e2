"""The app's event loop names a lane that holds it too long, once per stall, and is quiet
while every callback yields in time."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from conveyor.processing import event_loop as event_loop_module
from conveyor.processing.event_loop import EventLoopThread

if TYPE_CHECKING:
    from unit.conftest import YoungClock


def _loop(blocked: list[tuple[str, float]], told: threading.Event) -> EventLoopThread:
    def on_blocked(task: str, seconds: float) -> None:
        blocked.append((task, seconds))
        told.set()

    return EventLoopThread("test", lambda error: None, on_blocked=on_blocked, blocked_after=0.1)


def test_a_lane_that_blocks_the_loop_is_named_once() -> None:
    blocked: list[tuple[str, float]] = []
    told = threading.Event()
    loop = _loop(blocked, told)
    done = threading.Event()

    async def blocking_lane() -> None:
        time.sleep(0.4)  # the mistake: a blocking call in async def consume()
        done.set()

    try:
        loop.submit(blocking_lane(), "orders/3 lane 5")
        assert told.wait(5), "nobody said the loop was held"
        assert done.wait(5)
        time.sleep(0.2)  # the stall is over: no second report of it
    finally:
        loop.stop(5)
    assert [task for task, _ in blocked] == ["orders/3 lane 5"]
    assert blocked[0][1] > 0.1


def test_a_stall_from_the_clocks_zero_is_reported(young_clock: YoungClock) -> None:
    """A pulse at a reading of exactly 0.0 is a pulse like any other (0.0 is no "nothing
    told yet")."""
    young_clock.seen_by(event_loop_module).freeze(0.0)
    blocked: list[tuple[str, float]] = []
    told = threading.Event()
    loop = _loop(blocked, told)

    async def blocking_lane() -> None:
        young_clock.thaw()  # the last pulse read 0.0; the loop is held from here
        time.sleep(0.4)

    try:
        loop.submit(blocking_lane(), "orders/1 lane 2")
        assert told.wait(5), "nobody said the loop was held"
    finally:
        loop.stop(5)
    assert [task for task, _ in blocked] == ["orders/1 lane 2"]


def test_lanes_that_await_are_not_reported() -> None:
    blocked: list[tuple[str, float]] = []
    told = threading.Event()
    loop = _loop(blocked, told)
    done = threading.Event()

    async def polite_lane() -> None:
        for _ in range(20):
            await asyncio.sleep(0.02)  # 0.4 s in all, never holding the loop
        done.set()

    try:
        loop.submit(polite_lane(), "orders/0 lane 1")
        assert done.wait(5)
    finally:
        loop.stop(5)
    assert blocked == []


def test_unwatched_without_a_threshold() -> None:
    loop = EventLoopThread("unwatched", lambda error: None)  # a name of its own: other
    done = threading.Event()  # tests' "test" loops may still be ending their watchdogs

    async def lane() -> None:
        done.set()

    try:
        loop.submit(lane(), "x")
        assert done.wait(5)
        assert not [t for t in threading.enumerate() if t.name == "unwatched-loop-watchdog"]
    finally:
        loop.stop(5)
