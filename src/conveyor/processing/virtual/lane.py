"""``Lane``: one virtual partition of a partition, its queue, its consumer instance and the
batch it runs. It is its consumer's partition handle: what the consumer asks (marking,
pausing, producing, dead letters) goes to the partition, with marks meaning this lane's
messages. ``LaneOwner``: what a lane asks of its partition's executor."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.errors import ConfigurationError
from conveyor.messages import Message
from conveyor.partition import PartitionHandle

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.processing.offset_metadata import OffsetMetadata
    from conveyor.processing.partition_core import RunningBatch
    from conveyor.producer import Producer
    from conveyor.state.view import State
    from conveyor.tracing.latency import PollTimes
    from conveyor.tracing.tracer import Tracing

__all__ = ["Lane", "LaneOwner", "queued"]


class LaneOwner(PartitionHandle, Protocol):
    """What a lane asks of its virtual partitions' executor: the partition it stands in for
    (what a consumer asks of it goes there), and what only an executor of lanes does."""

    @property
    def metadata(self) -> OffsetMetadata:
        """The metadata that marks gave, and that commits carry."""

    def run_lane(self, lane: Lane) -> None:
        """``lane``'s job on the worker pool: its batches until its queue is empty."""

    def lane_failed(self, lane: Lane, batch: list[Any], error: Exception, started: float) -> None:
        """``lane``'s ``consume()`` of ``batch`` raised ``error`` (``started``: its
        ``perf_counter()``): the failure policy's retry, dead letter or skip."""

    def new_consumer(self, lane: Lane) -> Consumer:
        """A consumer instance for ``lane``, its partition handle the lane."""

    def finish(self, offsets: list[int], sync: bool) -> bool:
        """``offsets`` finished; with ``sync``, commit the partition's committable offset now.
        False when the partition was revoked (or the commit failed)."""

    def lane_views(self, lane: Lane) -> Mapping[str, State]:
        """``lane``'s views of the partition's stores (a write set of its own)."""


class Lane:
    """One virtual partition: its queue, its consumer instance, the batch it runs.

    It is its consumer's ``_executor``: what the consumer asks (marking, pausing, producing,
    dead letters) goes to the partition, with marks meaning this lane's messages."""

    def __init__(self, executor: LaneOwner, index: int) -> None:
        self.executor = executor
        self.index = index
        self.queue: deque[Any] = deque()
        self.active = False  # a job of this lane is queued or running
        self.batch: list[Any] = []  # the batch it runs now
        self.running: RunningBatch | None = None
        self.consumer: Consumer | None = None
        self.abort = False  # the consumer sought or paused: do not mark the batch
        self.handed_out = 0
        # when its queue last went from empty to not (monotonic); never yet: -inf, so a queue
        # filled otherwise (a collapse) is due at once
        self.since = -math.inf

    def run(self) -> None:
        """Its job on the worker pool (see :meth:`LaneOwner.run_lane`)."""
        self.executor.run_lane(self)

    def failed(self, batch: list[Any], error: Exception, started: float) -> None:
        """Its ``consume()`` of ``batch`` raised (see :meth:`LaneOwner.lane_failed`)."""
        self.executor.lane_failed(self, batch, error, started)

    def put_back(self, batch: list[Any]) -> None:
        """``batch`` runs again first (the caller holds the partition's lock)."""
        self.queue.extendleft(reversed(batch))

    def instance(self) -> Consumer:
        """Its consumer instance (made when first needed)."""
        consumer = self.consumer
        if consumer is None:
            consumer = self.executor.new_consumer(self)
            self.consumer = consumer
        return consumer

    # -- what its consumer asks ---------------------------------------------------------------

    @property
    def revoked(self) -> bool:
        return self.executor.revoked

    @property
    def attempt(self) -> int:
        return self.executor.attempt

    @property
    def group_id(self) -> str:
        return self.executor.group_id

    def producer(self) -> Producer:
        return self.executor.producer()

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        """The consumer marked the message before ``next_offset``: it and this lane's earlier
        messages of the batch finished; ``metadata`` goes with the first commit at or past
        ``next_offset`` (once the other lanes finished what comes before it)."""
        if metadata is not None and not self.executor.revoked:
            self.executor.metadata.mark(next_offset, metadata)
        last = next_offset - 1
        return self.executor.finish(
            [raw.offset() for raw in self.batch if raw.offset() <= last] or [last], sync
        )

    def dispatch_to_dlq(
        self, message: Message, dlq_topic: str, error: BaseException | None = None
    ) -> None:
        self.executor.dispatch_to_dlq(message, dlq_topic, error)

    def send_held(self, offset: int, message: dict[str, Any], producer: Producer) -> DeliveryHandle:
        return self.executor.send_held(offset, message, producer)

    def request_seek(self, offset: int) -> None:
        self.abort = True
        self.executor.request_seek(offset)

    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        self.abort = True
        self.executor.request_pause(offset, timeout)

    def request_resume(self) -> None:
        self.executor.request_resume()

    @property
    def collapsed(self) -> bool:
        return self.executor.collapsed

    @property
    def offset_metadata(self) -> str | None:
        return self.executor.offset_metadata

    def offset_at(self, when: float) -> int:
        return self.executor.offset_at(when)

    @property
    def topic(self) -> str:
        return self.executor.topic

    @property
    def partition(self) -> int:
        return self.executor.partition

    @property
    def joint_seat(self) -> None:
        return None  # transactions are not run here

    @property
    def in_lane(self) -> bool:
        return True

    @property
    def high_watermark(self) -> int | None:
        return self.executor.high_watermark

    @property
    def kafka(self) -> Mapping[str, Any]:
        return self.executor.kafka

    @property
    def tracing(self) -> Tracing | None:
        return self.executor.tracing

    @property
    def polls(self) -> PollTimes:
        return self.executor.polls

    def transactional_producer(self) -> Producer:
        return self.executor.transactional_producer()

    def offsets_in_transactions(self) -> None:
        raise ConfigurationError(
            "transaction() is not available in virtual partitions' lanes", "virtual_partitions"
        )

    def group_metadata(self) -> Any:
        return self.executor.group_metadata()

    def forget_group_metadata(self) -> None:
        self.executor.forget_group_metadata()

    def state_views(self) -> Mapping[str, State]:
        return self.executor.lane_views(self)

    def stage_state(self, producer: Producer) -> Callable[[], None] | None:
        return None

    def __repr__(self) -> str:
        executor = self.executor
        return f"<Lane {executor.topic}/{executor.partition}#{self.index} queued={len(self.queue)}>"


def queued(lanes: list[Lane]) -> bool:
    """Whether a lane holds messages that wait (a tail put back, or lingering for a batch)."""
    return any(lane.queue for lane in lanes)
