"""State stores with virtual partitions: each lane writes a write set of its own over the
partition's stores, flushed (to the changelogs, then the stores) when its batch ends well,
before its offsets finish, so the committed offset never passes a write not flushed. A key must
be written by one lane only (the state's key the lane's key): lanes do not see each other's
writes before their flushes. The stores open (restored from their changelogs) before the
executor hands anything out."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.errors import NotAssignedError

if TYPE_CHECKING:
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.strategies import FailurePolicy
    from conveyor.processing.timers import Timers
    from conveyor.processing.virtual.lane import Lane
    from conveyor.producer import Producer
    from conveyor.state.partition_stores import PartitionStores
    from conveyor.state.view import State

__all__ = ["LaneStores", "StoresOwner"]

_log = logging.getLogger("conveyor.processing")


class StoresOwner(Protocol):
    """What :class:`LaneStores` asks of its virtual partitions' executor."""

    topic: str
    partition: int
    context: ProcessingContext
    policy: FailurePolicy

    @property
    def revoked(self) -> bool: ...

    @property
    def stopped(self) -> bool: ...

    @property
    def timers(self) -> Timers: ...

    def producer(self) -> Producer: ...

    def waits_for_predecessor(self) -> bool:
        """Whether the revoked predecessor's last batch still runs (it releases this one)."""

    def release(self) -> None:
        """The stores are open: hand out what waits."""


class LaneStores:
    """A virtual partitions' executor's stores (see the module)."""

    def __init__(self, owner: StoresOwner, stores: PartitionStores) -> None:
        self._owner = owner
        self._stores = stores
        self._failures = 0

    def open(self) -> None:
        """Have the restore thread open the stores; the owner is released once they are."""
        space = self._owner.context.stores
        assert space is not None
        space.restorer.submit(self._stores, self._opened)

    def _opened(self, error: BaseException | None) -> None:
        """On the restore thread: the stores are open, or ``error`` (the restore runs again
        after the route's back-off)."""
        owner = self._owner
        if owner.revoked or owner.stopped:
            return
        if error is None:
            self._failures = 0
            if not owner.waits_for_predecessor():  # else its last batch releases the owner
                owner.release()
            return
        self._failures += 1
        delay = owner.policy.backoff.delay(self._failures)
        _log.error(
            "%s/%s: its stores could not be opened; trying again in %.1f s: %r",
            *(owner.topic, owner.partition, delay, error),
        )
        owner.timers.call_later(delay, self.open)

    def views(self, lane: Lane) -> Mapping[str, State]:
        """``lane``'s views of the stores (its consumer's ``self.stores``)."""
        if not self._stores.opened:
            raise NotAssignedError(
                f"{self._owner.topic}/{self._owner.partition}: its stores are not open (being "
                "restored, or the partition was revoked)"
            )
        return self._stores.lane_views(lane.index)

    def flushed(self, lane: Lane, batch: list[Any], started: float) -> bool:
        """``lane``'s batch ended well: its store writes, to the changelogs and then the
        stores, before its offsets finish; False when that failed (the batch failed, told to
        ``lane``). A partition revoked meanwhile writes nothing: its next owner runs the batch
        again."""
        stores = self._stores
        views = stores.lane_views(lane.index) if stores.opened else {}
        if self._owner.revoked or lane.abort:
            _discard(views)
            return True
        try:
            stores.flush_lane(views, self._owner.producer())
        except Exception as exc:
            _discard(views)
            lane.failed(batch, exc, started)
            return False
        return True

    def discard(self, lane: Lane) -> None:
        """``lane``'s batch failed: what it wrote goes."""
        if self._stores.opened:
            _discard(self._stores.lane_views(lane.index))


def _discard(views: Mapping[str, State]) -> None:
    for view in views.values():
        view.discard()
