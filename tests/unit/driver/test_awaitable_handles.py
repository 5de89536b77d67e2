"""Delivery handles are awaitable: the report settles the await through the loop, a failure
raises, a cancelled await leaves the delivery and nothing else behind."""

from __future__ import annotations

import asyncio
import threading

import pytest
from confluent_kafka import KafkaError

from conveyor.driver import handles
from conveyor.driver.handles import BatchDeliveryHandle, DeliveryHandle
from conveyor.errors import BatchDeliveryError, DeliveryError
from helpers import LoopTicks


class _Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)


def _error() -> KafkaError:
    return KafkaError(KafkaError._MSG_TIMED_OUT)


def _handle() -> DeliveryHandle:
    handle = DeliveryHandle.bound_to(None)()
    handle._fields = None
    handle._label = None
    return handle


def _report_later(callback, *args, delay: float = 0.05) -> threading.Thread:  # type: ignore[no-untyped-def]
    """Run ``callback(*args)`` on another thread, as the poller serves a report."""
    thread = threading.Timer(delay, callback, args)
    thread.start()
    return thread


def test_an_awaited_handle_gives_its_report_while_the_loop_runs_on() -> None:
    async def scenario() -> tuple[int, int]:
        handle = _handle()
        async with LoopTicks() as ticks:
            _report_later(handle, None, _Message(41))
            report = await handle
        return report.offset, ticks.count

    offset, ticks = asyncio.run(scenario())
    assert offset == 41
    assert ticks >= 5, "the loop was blocked while the await waited"


def test_an_awaited_failure_raises_the_delivery_error() -> None:
    async def scenario() -> None:
        handle = _handle()
        _report_later(handle, _error(), _Message(-1))
        await handle

    with pytest.raises(DeliveryError, match="timed out"):
        asyncio.run(scenario())


def test_a_cancelled_await_leaves_nothing_behind_once_reported() -> None:
    handle = _handle()

    async def scenario() -> None:
        waiting = asyncio.create_task(_await(handle))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert handle in handles._awaits, "the delivery is still awaited by the callback"
        handle(None, _Message(7))  # the report comes after all: settles a cancelled future
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert handle not in handles._awaits
    assert handle.result().offset == 7


async def _await(handle: DeliveryHandle) -> None:
    await handle


def test_two_tasks_awaiting_one_handle_both_get_its_report() -> None:
    async def scenario() -> list[int]:
        handle = _handle()
        first, second = asyncio.create_task(_offset(handle)), asyncio.create_task(_offset(handle))
        await asyncio.sleep(0.01)  # both wait now
        _report_later(handle, None, _Message(9), delay=0.0)
        return await asyncio.wait_for(asyncio.gather(first, second), timeout=5)

    assert asyncio.run(scenario()) == [9, 9]
    assert not handles._done_callbacks


def test_a_report_served_while_the_await_registers_still_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report lands after the await saw no result and before it registered: the await's
    look after registering finds it (else nobody would ever wake it)."""
    handle = _handle()

    class ReportFirst(dict):  # type: ignore[type-arg]
        def setdefault(self, key, default=None):  # type: ignore[no-untyped-def]
            handle(None, _Message(3))  # served on "another thread" just now: no await yet
            return super().setdefault(key, default)

    monkeypatch.setattr(handles, "_awaits", ReportFirst())

    async def scenario() -> int:
        return await asyncio.wait_for(_offset(handle), timeout=2)

    assert asyncio.run(scenario()) == 3
    assert not handles._awaits, "the entry is left behind"


def test_a_thousand_awaits_settle_in_bunches() -> None:
    async def scenario() -> list[int]:
        pending = [_handle() for _ in range(1000)]

        def report_all() -> None:
            for offset, handle in enumerate(pending):
                handle(None, _Message(offset))

        waiting = asyncio.gather(*(_offset(h) for h in pending))
        await asyncio.sleep(0.01)
        threading.Thread(target=report_all).start()
        return await waiting

    assert asyncio.run(scenario()) == list(range(1000))


async def _offset(handle: DeliveryHandle) -> int:
    return (await handle).offset


def test_an_awaited_burst_completes_with_its_last_report() -> None:
    async def scenario() -> int:
        burst = BatchDeliveryHandle(3)
        callback = burst.shared_callback()

        def deliver() -> None:
            for offset in range(3):
                callback(None, _Message(offset))

        _report_later(deliver)
        assert await burst == []  # no labels, no reports kept
        return burst.count

    assert asyncio.run(scenario()) == 3


def test_an_awaited_burst_raises_its_failures() -> None:
    async def scenario() -> None:
        burst = BatchDeliveryHandle(2)
        callback = burst.shared_callback()
        _report_later(lambda: (callback(None, _Message(0)), callback(_error(), _Message(1))))
        await burst

    with pytest.raises(BatchDeliveryError, match="1 of 2"):
        asyncio.run(scenario())


def test_an_empty_or_finished_burst_is_awaited_at_once() -> None:
    async def scenario() -> list[object]:
        return [await BatchDeliveryHandle(0)]

    assert asyncio.run(scenario()) == [[]]


def test_reports_racing_the_awaits_never_leave_one_waiting() -> None:
    """The report may come while an await registers: every await still ends (500 races of
    each kind, the report served by another thread at the same moment)."""

    def report(handle: DeliveryHandle, burst: BatchDeliveryHandle, go: threading.Event) -> None:
        callback = burst.shared_callback()
        go.wait()
        handle(None, _Message(1))
        callback(None, _Message(1))

    async def scenario() -> int:
        ended = 0
        for _ in range(500):
            handle, burst, go = _handle(), BatchDeliveryHandle(1), threading.Event()
            thread = threading.Thread(target=report, args=(handle, burst, go))
            thread.start()
            go.set()
            await asyncio.wait_for(_both(handle, burst), timeout=5)
            thread.join()
            ended += 1
        return ended

    assert asyncio.run(scenario()) == 500


async def _both(handle: DeliveryHandle, burst: BatchDeliveryHandle) -> None:
    await handle
    await burst
