"""The joint transaction's bookkeeping (``transaction_interval``), with a recording stand-in
for the producer's transaction calls: when it commits, what it commits, and who runs their
batches again after an abort. The Kafka side is tested against the broker in
``tests/integration/processing/test_exactly_once.py`` and ``tests/integration/state``."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from conveyor import App
from conveyor.errors import ConfigurationError, TransactionError
from conveyor.processing.joint_transaction import JointTransaction
from conveyor.processing.timers import Timers


class Transactions:
    """Records the calls a joint transaction makes (``begin``, ``offsets``, ``commit``,
    ``abort``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.refuse_commit = False
        self.ended = threading.Event()

    def open_shared(self) -> None:
        self.calls.append(("begin",))

    def join_shared(self) -> object:
        return object()

    def leave_shared(self, joined: object) -> None:
        pass

    def send_offsets(self, offsets: Any, group_metadata: Any, *, metadata: Any = None) -> None:
        self.calls.append(("offsets", sorted(offsets), metadata))

    def close_shared(self, commit: bool, cause: BaseException | None = None) -> None:
        if commit and self.refuse_commit:
            self.calls.append(("abort",))
            self.ended.set()
            raise TransactionError("refused")
        self.calls.append(("commit",) if commit else ("abort",))
        self.ended.set()


class Producer:
    def __init__(self) -> None:
        self.transactions = Transactions()


class Member:
    """A partition that joins: records its marks, rewinds and stores' applies."""

    def __init__(self, partition: int, topic: str = "t") -> None:
        self.topic = topic
        self.partition = partition
        self.revoked = False
        self.offset_metadata: str | None = None
        self.group_id = "g"
        self.marks: list[int] = []
        self.rewinds: list[tuple[int, bool]] = []
        self.applied = 0
        self.kept = 0
        self.rewind_asked = 0
        self.marked = threading.Event()
        self.waiting: int | None = None  # the first offset of batches whose writes wait

    def group_metadata(self) -> str:
        return "generation-1"

    def forget_group_metadata(self) -> None:
        pass

    def offsets_in_transactions(self) -> None:
        pass

    def keep_state(self) -> None:
        self.kept += 1

    def adopt_kept(self) -> int | None:
        waiting, self.waiting = self.waiting, None
        return waiting

    def stage_state(self, producer: Any, kept_only: bool = False) -> Any:
        assert kept_only, "a commit on another thread than the batch's stages kept writes only"

        def apply() -> None:
            self.applied += 1

        return apply

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        self.marks.append(next_offset)
        self.marked.set()
        return True

    def rewind(self, first: int, in_batch: bool) -> None:
        self.rewinds.append((first, in_batch))

    def rewind_due(self) -> None:
        self.rewind_asked += 1


@pytest.fixture
def joint() -> Any:
    timers = Timers("joint-test")
    producer = Producer()
    made = JointTransaction(lambda: producer, 3600.0, timers)  # commits when told, in these
    made.test_producer = producer  # type: ignore[attr-defined]
    yield made
    timers.stop()


def calls(joint: Any) -> list[tuple[Any, ...]]:
    return joint.test_producer.transactions.calls


def test_blocks_of_two_partitions_commit_together_once_the_interval_is_over(joint: Any) -> None:
    a, b = Member(0), Member(1)
    joint.enter(a, 0)
    assert not joint.leave(a, 10, None)
    joint.enter(b, 0)
    assert not joint.leave(b, 7, "m")
    joint.enter(a, 10)
    assert not joint.leave(a, 20, None), "the interval is not over: the transaction stays open"
    assert calls(joint) == [("begin",)]
    assert a.marks == b.marks == []
    assert a.applied == b.applied == 0
    joint.interval = 0.0  # over now
    joint.enter(b, 7)
    assert joint.leave(b, 9, None), "the last block out commits"
    joint.close()
    assert calls(joint) == [
        ("begin",),
        ("offsets", [("t", 0, 20), ("t", 1, 9)], {("t", 1): "m"}),
        ("commit",),
    ]
    assert (a.marks, b.marks) == ([20], [9]), "marked here only after the commit"
    assert (a.applied, b.applied) == (1, 1), "the stores written after the commit, once"
    assert (a.kept, b.kept) == (2, 2), "each block's store writes kept for the commit"


def test_writes_after_a_block_are_kept_between_commits_not_during_one(joint: Any) -> None:
    a, b = Member(0), Member(1)
    kept_after: list[tuple[Any, ...]] = []
    a.keep_state = lambda: kept_after.append(calls(joint)[-1])  # type: ignore[method-assign]
    held: list[bool] = []
    returned_after: list[tuple[Any, ...]] = []

    def keep() -> None:
        held.append(joint.keep_if_held(a))
        returned_after.append(calls(joint)[-1])

    keeper = threading.Thread(target=keep)
    staged = b.stage_state

    def stage_while_a_keeps(producer: Any, kept_only: bool = False) -> Any:
        # in the commit: a's batch ends with writes made after its block, and keeps them
        keeper.start()
        keeper.join(0.5)  # (it must not: the commit reads the kept writes now)
        return staged(producer, kept_only)

    b.stage_state = stage_while_a_keeps  # type: ignore[method-assign]
    joint.enter(a, 0)
    joint.enter(b, 0)
    joint.interval = 0.0
    assert not joint.leave(a, 10, None)
    kept_after.clear()
    assert joint.leave(b, 5, None)
    joint.close()
    keeper.join(10)
    assert kept_after == [], "not kept while the commit read the kept writes"
    assert returned_after == [("commit",)], "a flushes nothing before the commit wrote a's"
    assert held == [False], "after it, the transaction held none of a's: a flushes them itself"
    joint.interval = 3600.0
    joint.enter(a, 10)
    assert not joint.leave(a, 12, None)
    assert joint.keep_if_held(a), "now it does: they join it"
    assert len(kept_after) == 2  # the block's, then the rest of the batch's


def test_writes_waiting_for_a_partition_s_flush_join_its_first_block_s_transaction(
    joint: Any,
) -> None:
    """A batch that ended after the commit of its block's transaction (or had no block)
    keeps its writes for the partition's own flush; the partition's next block takes them
    into the transaction, and an abort runs their batches again too."""
    a, b = Member(0), Member(1)
    a.waiting = 4
    joint.enter(a, 10)
    assert a.waiting is None, "its own flush no longer writes them"
    joint.leave(a, 12, None)
    joint.enter(b, 0)
    assert not joint.fail(b, RuntimeError("b's block failed"), 0, 3)  # the abort
    assert joint.take_rewind(a) == 4, "from the first batch whose writes it took"


def test_the_timer_commits_what_idle_partitions_left_in_the_transaction(joint: Any) -> None:
    a = Member(0)
    joint.interval = 0.05
    joint.enter(a, 0)
    joint.interval = 3600.0  # the block's own end does not commit it
    assert not joint.leave(a, 5, None)
    assert a.marked.wait(10), "the timer committed it"
    assert calls(joint)[-1] == ("commit",)
    assert a.marks == [5]


def test_a_failing_block_aborts_and_every_partition_with_earlier_batches_runs_them_again(
    joint: Any,
) -> None:
    a, b, c = Member(0), Member(1), Member(2)
    joint.enter(a, 0)
    joint.leave(a, 10, None)
    joint.enter(b, 100)
    joint.leave(b, 110, None)
    joint.enter(c, 50)  # its first batch in the transaction fails
    assert joint.fail(c, RuntimeError("boom"), 50, 60) is False
    assert calls(joint) == [("begin",), ("abort",)]
    assert c.rewinds == [], "its own failure path retries its batch"
    assert (a.rewind_asked, b.rewind_asked) == (1, 1)
    assert joint.take_rewind(a) == 0
    assert joint.take_rewind(b) == 100
    assert a.marks == b.marks == []
    assert a.applied == b.applied == 0
    # a partition whose earlier batch is in the transaction is rewound by its own failure
    joint.enter(a, 0)
    joint.leave(a, 10, None)
    joint.enter(a, 10)
    assert joint.fail(a, RuntimeError("boom"), 10, 20) is True
    assert a.rewinds == [(0, True)], "back to its first offset in the aborted transaction"


def test_a_partition_that_failed_commits_alone_until_past_the_batch_that_failed(
    joint: Any,
) -> None:
    a, b = Member(0), Member(1)
    joint.enter(a, 0)
    joint.fail(a, RuntimeError("boom"), 0, 10)
    joint.enter(b, 0)
    joint.leave(b, 5, None)
    joint.enter(a, 0)  # its retry: b's work is committed first, so that a failure spares it
    assert calls(joint)[-3:] == [("offsets", [("t", 1, 5)], None), ("commit",), ("begin",)]
    assert b.marks == [5]
    assert joint.leave(a, 4, None), "alone: it commits at once"
    joint.close()
    assert a.marks == [4]
    joint.enter(a, 4)
    assert joint.leave(a, 10, None)
    joint.close()
    joint.enter(a, 10)
    assert not joint.leave(a, 20, None), "past the batch that failed: it joins again"


def test_a_refused_commit_rewinds_every_partition_and_a_revoked_one_aborts(joint: Any) -> None:
    a, b, c = Member(0), Member(1), Member(2)
    joint.test_producer.transactions.refuse_commit = True
    joint.enter(a, 0)
    joint.leave(a, 3, None)
    joint.enter(c, 0)
    joint.leave(c, 3, None)
    joint.settle(c)  # (c's revocation commits what the transaction holds: refused here)
    assert a.marks == []
    assert joint.take_rewind(a) == 0
    with pytest.raises(TransactionError, match="revoked"):
        joint.enter(c, 3)  # its revocation is under way: no more blocks of it here
    joint.test_producer.transactions.refuse_commit = False
    joint.enter(a, 0)
    joint.leave(a, 3, None)
    joint.enter(b, 0)
    joint.leave(b, 3, None)
    d = Member(3)
    joint.enter(d, 0)
    joint.leave(d, 3, None)
    a.revoked = True  # lost before the commit (no revocation): its offset would be refused
    joint.settle(d)  # d's revocation commits: refused for a's sake
    assert calls(joint)[-1] == ("abort",)
    assert joint.take_rewind(b) == 0, "b stays here: it reads its batches again"
    assert joint.take_rewind(a) is None, "lost: its next owner reads them"
    assert joint.take_rewind(d) is None, "being revoked: its next owner reads them"
    with pytest.raises(TransactionError, match="revoked"):
        joint.enter(a, 3)


def test_a_rewound_partition_refuses_the_batch_that_came_before_its_rewind(joint: Any) -> None:
    a, b = Member(0), Member(1)
    joint.enter(a, 0)
    joint.leave(a, 10, None)
    joint.enter(b, 0)
    joint.fail(b, RuntimeError("boom"), 0, 5)
    with pytest.raises(TransactionError, match="run again from offset 0"):
        joint.enter(a, 10)  # fetched before the seek back: not processed
    assert a.rewinds == [(0, True)]


@pytest.mark.parametrize(
    ("value", "kafka", "text"),
    [
        (-1, {}, "transaction_interval"),
        ("1", {}, "transaction_interval"),
        (True, {}, "transaction_interval"),
        (30, {}, "under half"),
        (5, {"transaction.timeout.ms": 8000}, "under half"),
    ],
)
def test_a_malformed_transaction_interval_is_refused_naming_it(
    value: Any, kafka: dict[str, Any], text: str
) -> None:
    with pytest.raises(ConfigurationError, match=text) as refused:
        App(
            client_id="t",
            kafka={"bootstrap.servers": "127.0.0.1:9", **kafka},
            transaction_interval=value,
        )
    assert refused.value.setting == "transaction_interval"
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"}, transaction_interval=1)
    assert app.settings.transaction_interval == 1.0
