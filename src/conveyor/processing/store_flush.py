"""When a partition's store writes are flushed, and the offsets marked with them.

A batch that ends well keeps its store writes (:meth:`PartitionStores.keep`) and leaves its
offset unmarked; the kept writes of the batches since the last flush go to the changelogs and
the local stores in one flush every ``state_flush_interval`` (and whenever the partition's
job ends held or stopping, or another offset is about to be marked), so that a key written
by many batches costs one changelog record per flush. Only then are their offsets marked: no
offset is ever committed before the store writes of the batches up to it are durable.

A job that ends because its backlog ran dry does not flush before the interval is over: at a
high rate backlogs run dry many times a second. A timer asks for a flush when it is over (the
partition's own job, :meth:`FlushOwner.flush_due`); a revoked partition and a stopping app
flush what their idle partitions kept before their offsets are committed.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from conveyor.processing.strategies import FailurePolicy
    from conveyor.processing.timers import Timer, Timers
    from conveyor.producer import Producer
    from conveyor.state.partition_stores import PartitionStores

__all__ = ["FlushOwner", "StoreFlush"]

_log = logging.getLogger("conveyor.processing")

KEPT_MAX = 100_000
"""Keys kept for the next flush: past this many, a batch's end flushes at once."""


class FlushOwner(Protocol):
    """What a flush needs of its partition."""

    topic: str
    partition: int
    revoked: bool
    policy: FailurePolicy

    def producer(self) -> Producer: ...

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool: ...

    def request_pause(self, offset: int | None, timeout: float | None) -> None: ...

    def flush_due(self) -> None:
        """The interval is over for writes kept since a job ended: flush them in a job."""


class StoreFlush:
    """One partition's batches whose store writes wait for the next flush (see the module).
    Used by the partition's job only: one thread at a time."""

    __slots__ = (
        "_failures",
        "_first",
        "_flushed_at",
        "_owner",
        "_stores",
        "_through",
        "_timer",
        "_timers",
        "interval",
    )

    def __init__(
        self, owner: FlushOwner, stores: PartitionStores, interval: float, timers: Timers
    ) -> None:
        self._owner = owner
        self._stores = stores
        self._timers = timers
        self._timer: Timer | None = None  # asks for the flush of a job that ended with writes kept
        self.interval = interval
        self._first: int | None = None  # the first offset of the first batch kept
        self._through: int | None = None  # the offset to mark once they are flushed
        self._flushed_at = time.monotonic()
        self._failures = 0

    @property
    def waiting(self) -> bool:
        """Whether batches' writes (and offsets) wait for a flush."""
        return self._through is not None

    def defer(self, first: int, through: int) -> bool:
        """The batch of offsets ``first`` up to ``through`` ended well: keep its writes for the
        next flush and its offset unmarked (flushing now when the interval is over or too
        much is kept). False when it is not deferred (no interval, or nothing written since
        the last flush): its writes are flushed and its offset marked now, as before."""
        stores = self._stores
        if not self.interval or not stores.dirty:
            return False
        stores.keep()
        if self._first is None:
            self._first = first
        self._through = through
        if self._left() <= 0 or stores.kept >= KEPT_MAX:
            self.flush()
        return True

    def adopt(self) -> int | None:
        """A joint transaction takes over the writes kept (it commits them, with an offset
        past their batches'): the first offset of their batches, ``None`` when none wait."""
        return self._take()[0]

    def _take(self) -> tuple[int | None, int | None]:
        """Forget the batches kept and the timer asking for their flush: the first offset of
        their batches and the offset to mark once their writes are durable."""
        first, through = self._first, self._through
        self._first = self._through = None
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        return first, through

    def at_job_end(self, held: bool) -> bool:
        """The partition's job is about to end with writes kept (:attr:`waiting`): True when
        they are to be flushed now (``held``: the partition is held or the app stops; or the
        interval is over). Otherwise a timer calls the owner's ``flush_due`` once it is over.
        Called under the owner's lock."""
        left = self._left()
        if held or left <= 0:
            return True
        if self._timer is None:
            self._timer = self._timers.call_later(left, self._owner.flush_due)
        return False

    def _left(self) -> float:
        """Seconds until the flush interval since the last flush is over."""
        return self._flushed_at + self.interval - time.monotonic()

    def timer_ran(self) -> None:
        """The timer asked for its flush (called under the owner's lock)."""
        self._timer = None

    def after_tick(self, ticked: bool) -> None:
        """What ``tick()`` wrote to the stores (windows it closed) is written now, as a
        batch's is (with the batches' kept before it); when it raised or the write fails, it
        is dropped (the windows close again later)."""
        owner, stores = self._owner, self._stores
        if not stores.opened or not stores.dirty:
            return
        if not ticked or owner.revoked:
            stores.discard()
            return
        if self.waiting:
            self.flush()
            return
        try:
            stores.flush(owner.producer())
        except Exception as exc:
            stores.discard()
            _log.error(
                "%s/%s: what tick() wrote to the stores was dropped: %r",
                *(owner.topic, owner.partition, exc),
            )

    def flush(self, again: bool = True) -> bool:
        """Flush the kept writes and mark their batches' offset. When that fails, their writes
        are dropped and, with ``again``, the partition seeks back to their first offset after
        the route's back-off (they run again; without it, the partition is going away and its
        next owner runs them). False then, or when the partition was revoked (the next owner
        runs them again)."""
        owner, stores = self._owner, self._stores
        first, through = self._take()
        if through is None:
            return True
        if owner.revoked:
            stores.discard_all()
            return False
        try:
            if stores.dirty:
                stores.flush(owner.producer())
        except Exception as exc:
            stores.discard_all()
            self._failures += 1
            delay = owner.policy.backoff.delay(self._failures)
            _log.error(
                "%s/%s: the store writes of offsets %s-%s could not be flushed; %s: %r",
                *(owner.topic, owner.partition, first, through - 1),
                f"running them again in {delay:.1f} s" if again else "their next owner runs them",
                exc,
            )
            if again:
                owner.request_pause(first, delay)
            return False
        self._failures = 0
        self._flushed_at = time.monotonic()
        owner.mark(through, sync=False)
        return True
