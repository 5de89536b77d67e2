"""One Kafka transaction that the ``with self.transaction():`` blocks of many partitions'
batches join, committed every ``transaction_interval``.

A transaction per batch costs a round of broker calls (its offsets, its commit, the markers
the broker writes), and the app's transactional producer runs one transaction at a time: at
a few hundred messages per batch the commits, not the processing, set the pace. With
``transaction_interval`` set, a block joins the open transaction of the app's transactional
producer instead of beginning its own: what it produces goes into it, while the offset it
marks and its stores' writes wait with it. The transaction commits once the interval since it
began is over (at the end of a block, or on a timer when no block runs), when a partition that
joined it is revoked, and when the app stops; only then are the stores written and the offsets
marked here.

Every block that joined commits with it or none does. A block that raises, a partition revoked
before the commit and a commit the broker refuses abort it, and each partition with batches in
it runs them again from its first offset in it: its own job seeks back and drops their store
writes (the partition's next block, or a job of its own when it is idle). A partition whose
block raised then commits its blocks alone until it is past the batch that raised: its retries
and dead letters follow the route's policy as with a transaction per batch, and its retries
do not throw the other partitions' work away again and again.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.errors import TransactionError

if TYPE_CHECKING:
    from conveyor.processing.timers import Timer, Timers
    from conveyor.producer import Producer

__all__ = ["JointMember", "JointTransaction", "Seat"]

_log = logging.getLogger("conveyor.processing")

_SETTLE_WAIT = 5.0
"""Seconds a revocation waits for running blocks before the commit is left to the last one."""


class JointMember(Protocol):
    """What the joint transaction needs of a partition that joins it."""

    topic: str
    partition: int
    revoked: bool

    @property
    def group_id(self) -> str: ...

    @property
    def offset_metadata(self) -> str | None: ...

    def group_metadata(self) -> Any: ...

    def forget_group_metadata(self) -> None: ...

    def offsets_in_transactions(self) -> None: ...

    def keep_state(self) -> None:
        """The block ended well: its stores' writes wait for the commit."""

    def adopt_kept(self) -> int | None:
        """Its first block joins: the store writes kept for the partition's own flush (of
        batches whose blocks committed before, or that had none) are the transaction's now.
        The first offset of their batches (``None``: none wait)."""

    def stage_state(
        self, producer: Producer, kept_only: bool = False
    ) -> Callable[[], None] | None: ...

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool: ...

    def rewind(self, first: int, in_batch: bool) -> None:
        """On the partition's own thread: its batches from ``first`` on were aborted; drop
        their store writes and read them again (``in_batch``: the running batch is one)."""

    def rewind_due(self) -> None:
        """A rewind waits (:meth:`JointTransaction.take_rewind`): run it in a job of the
        partition's own unless a job runs (it takes it at its next block or its end)."""


class _Share:
    """What one partition has in the open transaction."""

    __slots__ = ("first", "metadata", "next_offset")

    def __init__(self, first: int) -> None:
        self.first = first  # its first batch's first offset: where an abort rewinds it to
        self.next_offset: int | None = None
        self.metadata: str | None = None


class JointTransaction:
    """The app's open transaction that partitions' blocks join (see the module)."""

    def __init__(self, producer: Callable[[], Producer], interval: float, timers: Timers) -> None:
        self._producer = producer
        self.interval = interval
        self._timers = timers
        self._cond = threading.Condition()
        self._open = False
        self._opened_at = 0.0
        self._active = 0  # blocks inside
        self._closing = False  # a commit or abort waits for the blocks to end, or runs
        self._doomed: BaseException | None = None  # why it must abort
        self._shares: dict[JointMember, _Share] = {}
        self._solo: dict[tuple[str, int], int] = {}  # partitions whose block raised: until where
        self._rewinds: dict[JointMember, int] = {}  # aborted partitions: where they start again
        self._closed = 0  # transactions ended so far (a failed block waits for its abort)
        self._leaving: weakref.WeakSet[JointMember] = weakref.WeakSet()  # revoked or stopping
        self._timer: Timer | None = None

    def seat(self, member: JointMember) -> Seat:
        """The handle ``member``'s blocks join the transaction with."""
        return Seat(self, member)

    # -- a block's way in and out ----------------------------------------------------------

    def enter(self, member: JointMember, first: int) -> None:
        """Before a block of ``member``'s batch starting at ``first``: wait for a commit under
        way, begin the transaction if none is open, count the block in.

        Raises:
            TransactionError: the partition's earlier batches were aborted with another's
                block; it was rewound (this batch runs again after them).
        """
        key = (member.topic, member.partition)
        if member.revoked:
            raise TransactionError(
                f"{member.topic}/{member.partition} was revoked: its batch is not processed here"
            )
        # Before the block counts: the first time, this commits what the listener holds
        # (a call to its thread), which a revocation's settle (on that thread) must not wait for.
        member.offsets_in_transactions()
        with self._cond:
            while True:
                if member in self._leaving:  # its revocation committed what it had: no more
                    raise TransactionError(
                        f"{member.topic}/{member.partition} was revoked: its batch is not "
                        "processed here"
                    )
                rewind = self._rewinds.pop(member, None)
                if rewind is not None:
                    break
                if self._closing:
                    self._cond.wait()
                    continue
                if key in self._solo and any(other is not member for other in self._shares):
                    # its retry must not abort the others' work: commit that first
                    self._closing = True
                    if self._active:
                        continue
                    self._cond.release()
                    try:
                        self._close()
                    finally:
                        self._cond.acquire()
                    continue
                break
            if rewind is None:
                if not self._open:
                    self._begin()
                self._active += 1
                if member not in self._shares:
                    # writes of earlier batches waiting for the partition's own flush join
                    # too: an abort runs them again with the rest
                    waiting = member.adopt_kept()
                    self._shares[member] = _Share(first if waiting is None else min(first, waiting))
                return
        member.rewind(rewind, in_batch=True)
        raise TransactionError(
            f"{member.topic}/{member.partition}: the transaction its earlier batches were in "
            f"was aborted (another partition's block failed): they run again from offset {rewind}"
        )

    def leave(self, member: JointMember, next_offset: int, metadata: str | None) -> bool:
        """The block ended well, marking ``next_offset``: its offset and store writes wait for
        the commit. True when the caller must now :meth:`close` the transaction (the commit is
        due and no other block runs)."""
        member.keep_state()
        with self._cond:
            share = self._shares[member]
            if share.next_offset is None or next_offset >= share.next_offset:
                share.next_offset = next_offset
                if metadata is not None:
                    share.metadata = metadata
            self._active -= 1
            solo = (member.topic, member.partition) in self._solo
            if solo or time.monotonic() - self._opened_at >= self.interval:
                self._closing = True
            return self._closing and not self._active

    def fail(self, member: JointMember, error: BaseException, first: int, through: int) -> bool:
        """The block of ``member``'s batch ``first``-``through`` raised ``error``: abort the
        transaction (waiting for the other blocks in it to end). True when the partition had
        earlier batches in it and was rewound (they run again first; the batch's failure is
        not the route's to retry); False when the batch is its first: its failure path
        retries it (or moves it to the dead letter queue) as with a transaction per batch."""
        with self._cond:
            self._active -= 1
            share = self._shares.get(member)
            earlier = share is not None and share.first < first
            if share is not None and not earlier:
                del self._shares[member]  # nothing of its in the transaction to read again
            self._solo[(member.topic, member.partition)] = through
            if self._doomed is None:
                self._doomed = error
            self._closing = True
            closed = self._closed
            close = not self._active
            while not close and self._closed == closed:
                self._cond.wait()
        if close:
            self._close()
        if not earlier:
            return False
        with self._cond:
            rewind = self._rewinds.pop(member, None)
        if rewind is not None:
            member.rewind(rewind, in_batch=True)
        return True

    def keep_if_held(self, member: JointMember) -> bool:
        """``member``'s batch ended well (its block's writes are kept already): once no commit
        is under way (one may be reading its kept writes), keep what the batch wrote after its
        block for the open transaction if that holds the partition's batches (True). False: it
        holds none, and no commit touches the partition's stores until its next block joins
        (the partition flushes them itself meanwhile: see :meth:`enter`)."""
        with self._cond:
            while self._closing:
                self._cond.wait()
            if member not in self._shares:
                return False
            member.keep_state()
            return True

    def holds(self, member: JointMember) -> bool:
        """Whether the open transaction holds batches of ``member``."""
        return member in self._shares

    def take_rewind(self, member: JointMember) -> int | None:
        """Where ``member`` starts again after an abort (``None``: nothing to rewind)."""
        with self._cond:
            return self._rewinds.pop(member, None)

    def settle(self, member: JointMember, wait: float | None = _SETTLE_WAIT) -> None:
        """``member`` is revoked or the app stops: commit the transaction now if it holds the
        partition's batches. When blocks run, the last of them commits; this waits for that
        up to ``wait`` seconds (``None``: as long as it takes). A revoked partition's offsets
        are refused once the group moved on: the commit aborts then, and the others run their
        batches again."""
        deadline = None if wait is None else time.monotonic() + wait
        with self._cond:
            self._leaving.add(member)
            if member not in self._shares or not self._open:
                return
            if not self._closing and not self._active:
                self._closing = True
            else:  # someone commits, or the last block will: wait for it
                self._closing = True
                closed = self._closed
                while self._closed == closed:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return
                    self._cond.wait(left)
                return
        self._close()

    # -- the transaction itself ------------------------------------------------------------

    def _begin(self) -> None:
        """With the condition held: begin the transaction and arm the interval's timer."""
        self._producer().transactions.open_shared()
        self._open = True
        self._opened_at = time.monotonic()
        self._timer = self._timers.call_later(self.interval, self._due)

    def _due(self) -> None:
        """On the timers' thread: the interval is over. The last block to end commits; when
        none runs, a thread of its own does (a commit waits for the broker)."""
        with self._cond:
            self._timer = None
            if not self._open or self._closing:
                return
            self._closing = True
            if self._active:
                return
        threading.Thread(
            target=self._close, name="conveyor-transaction-commit", daemon=True
        ).start()

    def close(self) -> None:
        """Commit the transaction (or abort it, when a block failed): called by the block that
        :meth:`leave` told to."""
        self._close()

    def _close(self) -> None:
        """Commit or abort; run by one thread at a time, with ``_closing`` set and no block
        inside. After an abort, every partition that had batches in it is rewound."""
        with self._cond:
            shares, self._shares = self._shares, {}
            doomed, self._doomed = self._doomed, None
            timer, self._timer = self._timer, None
            opened = self._open
        if timer is not None:
            timer.cancel()
        try:
            if opened:
                self._finish(shares, doomed)
        finally:
            with self._cond:
                self._open = False
                self._closing = False
                self._closed += 1
                self._cond.notify_all()

    def _finish(self, shares: dict[JointMember, _Share], doomed: BaseException | None) -> None:
        producer = self._producer()
        transactions = producer.transactions
        applies: list[Callable[[], None]] = []
        try:
            joined = transactions.join_shared()
            try:
                if doomed is not None:
                    raise doomed
                self._send(producer, shares, applies)
            finally:
                transactions.leave_shared(joined)
        except BaseException as exc:
            transactions.close_shared(commit=False, cause=exc)
            self._aborted(shares, exc, by_block=exc is doomed)
            return
        try:
            transactions.close_shared(commit=True)
        except Exception as refused:  # aborted by the producer already (a TransactionError)
            self._aborted(shares, refused, by_block=False)
            return
        for apply in applies:
            apply()
        with self._cond:
            for member, share in shares.items():
                key = (member.topic, member.partition)
                through = self._solo.get(key)
                done = share.next_offset
                if through is not None and done is not None and done >= through:
                    del self._solo[key]
        for member, share in shares.items():
            if share.next_offset is not None:
                member.mark(share.next_offset, False, share.metadata)

    def _send(
        self,
        producer: Producer,
        shares: dict[JointMember, _Share],
        applies: list[Callable[[], None]],
    ) -> None:
        """In the open transaction: the stores' writes to their changelogs, then the offsets
        (one call per consumer group)."""
        by_group: dict[str, list[tuple[JointMember, _Share]]] = {}
        for member, share in shares.items():
            if member.revoked:
                raise TransactionError(
                    f"{member.topic}/{member.partition} was revoked before the transaction "
                    "committed: aborted, its batches run again where the partition is now"
                )
            if share.next_offset is None:
                continue
            # what its blocks kept: its batch may be writing on outside them, on its thread
            apply = member.stage_state(producer, kept_only=True)
            if apply is not None:
                applies.append(apply)
            by_group.setdefault(member.group_id, []).append((member, share))
        for entries in by_group.values():
            metadata = {}
            for member, share in entries:
                text = share.metadata if share.metadata is not None else member.offset_metadata
                if text is not None:
                    metadata[(member.topic, member.partition)] = text
            first = entries[0][0]
            try:
                producer.transactions.send_offsets(
                    [(m.topic, m.partition, s.next_offset) for m, s in entries if s.next_offset],
                    first.group_metadata(),
                    metadata=metadata or None,
                )
            except TransactionError:
                first.forget_group_metadata()  # a stale generation: ask again next time
                raise

    def _aborted(
        self, shares: dict[JointMember, _Share], error: BaseException, by_block: bool
    ) -> None:
        _log.error(
            "the transaction of %d partition(s) was aborted (%s); their batches run again: %r",
            len(shares),
            "a block raised" if by_block else "it could not commit",
            error,
        )
        with self._cond:
            staying = [m for m in shares if not m.revoked and m not in self._leaving]
            for member in staying:
                self._rewinds[member] = shares[member].first
        for member in staying:
            member.rewind_due()


class Seat:
    """One partition's way into the joint transaction (what its consumer's blocks use)."""

    __slots__ = ("_joint", "_member")

    def __init__(self, joint: JointTransaction, member: JointMember) -> None:
        self._joint = joint
        self._member = member

    def enter(self, first: int) -> None:
        self._joint.enter(self._member, first)

    def leave(self, next_offset: int, metadata: str | None) -> bool:
        return self._joint.leave(self._member, next_offset, metadata)

    def fail(self, error: BaseException, first: int, through: int) -> bool:
        return self._joint.fail(self._member, error, first, through)

    def close(self) -> None:
        self._joint.close()

    def holds(self) -> bool:
        """Whether the open transaction holds batches of this partition."""
        return self._joint.holds(self._member)

    def keep_if_held(self) -> bool:
        return self._joint.keep_if_held(self._member)

    def take_rewind(self) -> int | None:
        return self._joint.take_rewind(self._member)

    def settle(self) -> None:
        self._joint.settle(self._member)
