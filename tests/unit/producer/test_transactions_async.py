"""``producer.transaction_async()``: the block belongs to the task that opened it, not to the
loop's thread; waiting for another block, beginning and committing leave the loop running; a
cancelled wait leaves the lock free."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from conveyor.errors import TransactionError
from conveyor.instrumentation.monitor import Monitor
from conveyor.producer.transactions import Transactions, off_the_loop


class FakeClient:
    """What Transactions calls of a librdkafka producer; ``commit_gate`` holds commits."""

    fatal = None

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.commit_gate = threading.Event()
        self.commit_gate.set()
        self.threads: set[int] = set()

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.threads.add(threading.get_ident())
        self.calls.append("begin")

    def commit_transaction(self, timeout: float) -> None:
        self.threads.add(threading.get_ident())
        assert self.commit_gate.wait(10), "the commit was never let through"
        self.calls.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")


def _transactions(client: FakeClient) -> Transactions:
    def report(kind: str, error: BaseException) -> None:
        raise AssertionError(f"{kind}: {error!r}")

    return Transactions(True, lambda: client, Monitor(), "p", report)


def test_only_the_task_that_opened_the_block_is_inside_it() -> None:
    client = FakeClient()
    transactions = _transactions(client)

    async def main() -> None:
        outside = asyncio.Event()
        seen: dict[str, bool] = {}

        async def other_task() -> None:
            await outside.wait()
            seen["other task"] = transactions.active()

        other = asyncio.create_task(other_task())
        async with transactions.transaction_async():
            seen["opener"] = transactions.active()
            spawned = asyncio.create_task(asyncio.sleep(0, transactions.active()))
            outside.set()
            await other
            seen["spawned inside"] = await spawned
        seen["opener after"] = transactions.active()
        assert seen == {
            "opener": True, "other task": False, "spawned inside": True, "opener after": False,
        }  # fmt: skip
        assert transactions.needs_implicit()

    asyncio.run(main())
    assert client.calls == ["init", "begin", "commit"]
    assert threading.get_ident() not in client.threads, "librdkafka's calls ran on the loop"


def test_a_second_block_waits_for_the_first_while_the_loop_runs() -> None:
    client = FakeClient()
    transactions = _transactions(client)
    order: list[str] = []

    async def block(name: str, release: asyncio.Event | None) -> None:
        async with transactions.transaction_async():
            order.append(f"{name} in")
            if release is not None:
                await release.wait()  # needs the loop: a blocked loop never gets here
            order.append(f"{name} out")

    async def main() -> None:
        release = asyncio.Event()
        first = asyncio.create_task(block("first", release))
        while "first in" not in order:
            await asyncio.sleep(0)
        second = asyncio.create_task(block("second", None))
        await asyncio.sleep(0.05)  # the second waits for the lock meanwhile
        assert order == ["first in"]
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)

    asyncio.run(main())
    assert order == ["first in", "first out", "second in", "second out"]
    assert client.calls == ["init", "begin", "commit", "begin", "commit"]


def test_a_thread_block_on_the_loop_of_an_open_async_block_raises_instead_of_hanging() -> None:
    transactions = _transactions(FakeClient())

    async def main() -> None:
        opened = asyncio.Event()

        async def elsewhere() -> None:  # a task of its own, started outside the block
            await opened.wait()
            with transactions.transaction():
                pass

        other = asyncio.create_task(elsewhere())
        async with transactions.transaction_async():
            opened.set()
            with pytest.raises(TransactionError, match="another task of this event loop"):
                await other

    asyncio.run(main())


def test_cancelled_awaits_leave_the_lock_free_and_the_commit_done() -> None:
    client = FakeClient()
    transactions = _transactions(client)

    async def main() -> None:
        release = asyncio.Event()

        async def holder() -> None:
            async with transactions.transaction_async():
                await release.wait()

        async def waiter() -> None:
            async with transactions.transaction_async():
                raise AssertionError("a cancelled waiter never runs its block")

        first = asyncio.create_task(holder())
        await asyncio.sleep(0.01)
        second = asyncio.create_task(waiter())
        await asyncio.sleep(0.05)
        second.cancel()  # cancelled while it waits for the lock
        with pytest.raises(asyncio.CancelledError):
            await second
        client.commit_gate.clear()
        release.set()
        await asyncio.sleep(0.05)
        first.cancel()  # cancelled while its commit runs: the commit still finishes
        with pytest.raises(asyncio.CancelledError):
            await first
        client.commit_gate.set()
        async with asyncio.timeout(10):  # the lock is free again
            async with transactions.transaction_async():
                pass

    asyncio.run(main())
    assert client.calls == ["init", "begin", "commit", "begin", "commit"]


def test_an_error_in_the_block_aborts_and_propagates() -> None:
    client = FakeClient()
    transactions = _transactions(client)

    async def main() -> Any:
        async with transactions.transaction_async():
            raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        asyncio.run(main())
    assert client.calls == ["init", "begin", "abort"]
    assert transactions._lock.acquire(blocking=False)


def test_many_blocks_waiting_at_once_all_run_in_turn() -> None:
    """More waiters than the loop's default executor has threads: a waiter holds no thread,
    so the open block's commit (on that executor) is never queued behind them."""
    client = FakeClient()
    transactions = _transactions(client)
    inside: list[int] = []

    async def block(number: int) -> None:
        async with transactions.transaction_async():
            inside.append(number)
            await asyncio.sleep(0.001)

    async def main() -> None:
        async with asyncio.timeout(30):
            await asyncio.gather(*(block(number) for number in range(40)))

    asyncio.run(main())
    assert sorted(inside) == list(range(40))
    assert client.calls.count("commit") == 40


def test_a_cancelled_off_the_loop_call_ends_before_the_cancellation_goes_on() -> None:
    """What runs after a cancelled send_offsets (the abort) never runs beside it."""
    order: list[str] = []
    release = threading.Event()

    def send_offsets() -> None:
        order.append("sending")
        assert release.wait(10)
        order.append("sent")

    async def main() -> None:
        task = asyncio.create_task(off_the_loop(send_offsets))
        while not order:
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done(), "the cancellation went on while the call ran"
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        order.append("aborting")

    asyncio.run(main())
    assert order == ["sending", "sent", "aborting"]


def test_a_thread_block_on_the_loop_makes_another_task_raise_instead_of_hanging_it() -> None:
    transactions = _transactions(FakeClient())

    async def main() -> None:
        opened = asyncio.Event()

        async def elsewhere() -> None:
            await opened.wait()
            with transactions.transaction():
                pass

        other = asyncio.create_task(elsewhere())
        with transactions.transaction():
            opened.set()
            with pytest.raises(TransactionError, match="another task of this event loop"):
                await other

    asyncio.run(main())
