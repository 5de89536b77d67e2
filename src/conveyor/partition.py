"""``PartitionHandle``: the partition a consumer serves, as the consumer (and the parts built
on consumers: sinks, scheduled messages) sees it.

Three classes implement it: the engine's :class:`~conveyor.processing.executor.PartitionExecutor`,
a virtual partition's :class:`~conveyor.processing.virtual.lane.Lane` (standing in for its
partition) and ``conveyor.testing``'s ``TestPartition``. mypy checks each against this list, so
a member one of them lacks is an error here, not an ``AttributeError`` in a user's test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.messages import Message
    from conveyor.processing.joint_transaction import Seat
    from conveyor.producer.producer import Producer
    from conveyor.state.view import State
    from conveyor.tracing.latency import PollTimes
    from conveyor.tracing.tracer import Tracing

__all__ = ["PartitionHandle"]


class PartitionHandle(Protocol):
    """One assigned partition: where it stands, how to mark and steer it, and the producers
    and tracing its consumer uses."""

    @property
    def topic(self) -> str:
        """The partition's topic."""

    @property
    def partition(self) -> int:
        """The partition's number."""

    @property
    def group_id(self) -> str:
        """The consumer group that reads it."""

    @property
    def revoked(self) -> bool:
        """Whether the group took it away from this process (marks are refused then)."""

    @property
    def attempt(self) -> int:
        """Failed attempts of the current batch so far."""

    @property
    def collapsed(self) -> bool:
        """Whether its virtual partitions run in one lane after a failure."""

    @property
    def in_lane(self) -> bool:
        """Whether the consumer runs in a virtual partition's lane (no transactions there)."""

    @property
    def high_watermark(self) -> int | None:
        """The partition's end as of the latest fetch (``None``: not known yet)."""

    @property
    def kafka(self) -> Mapping[str, Any]:
        """The app's librdkafka settings (what its producers are made with)."""

    @property
    def tracing(self) -> Tracing | None:
        """The app's tracing (``None``: none to trace with)."""

    @property
    def polls(self) -> PollTimes:
        """When each fetch came (for the spans of the batch's messages)."""

    @property
    def joint_seat(self) -> Seat | None:
        """Its way into the app's joint transaction (``transaction_interval``), or ``None``:
        each transaction block commits on its own."""

    def producer(self) -> Producer:
        """The app's producer."""

    def transactional_producer(self) -> Producer:
        """The app's transactional producer."""

    @property
    def offset_metadata(self) -> str | None:
        """The metadata of the partition's offset: the highest mark's that gave one, else what
        the group had committed when the partition was assigned."""

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        """Mark everything before ``next_offset`` consumed (``metadata``: committed with it);
        False when refused (revoked)."""

    def send_held(self, offset: int, message: dict[str, Any], producer: Producer) -> DeliveryHandle:
        """Send ``message`` at least once: the offset is not committed past ``offset`` until
        its delivery is acknowledged; returns its delivery handle."""

    def dispatch_to_dlq(
        self, message: Message, dlq_topic: str, error: BaseException | None = None
    ) -> None:
        """Copy ``message`` to the dead letter queue ``dlq_topic`` and mark it."""

    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        """Pause the partition (from ``offset``; for ``timeout`` seconds, or until resumed)."""

    def request_resume(self) -> None:
        """Resume a paused partition."""

    def request_seek(self, offset: int) -> None:
        """Continue from ``offset`` after the current batch."""

    def offset_at(self, when: float) -> int:
        """The first offset at or after ``when`` (epoch seconds), or the partition's end when
        no message is that new."""

    def offsets_in_transactions(self) -> None:
        """From now on transactions commit this partition's offsets (not the listener)."""

    def group_metadata(self) -> Any:
        """The consumer group's metadata, for a transaction's offsets."""

    def forget_group_metadata(self) -> None:
        """A transaction's offsets were refused: ask for the group's metadata again."""

    def state_views(self) -> Mapping[str, State]:
        """The partition's state stores by name (opened and restored on first use)."""

    def stage_state(self, producer: Producer) -> Callable[[], None] | None:
        """Send the batch's store writes to their changelogs in ``producer``'s open
        transaction; returns what writes them locally after the commit (``None``: none)."""
