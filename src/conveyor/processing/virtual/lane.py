"""``Lane``: one virtual partition of a partition, its queue, its consumer instance and the
batch it runs. It is its consumer's partition handle: what the consumer asks (marking,
pausing, producing, dead letters) goes to the partition, with marks meaning this lane's
messages."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.messages import Message

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.processing.partition_core import RunningBatch
    from conveyor.processing.virtual.executor import VirtualPartitionExecutor
    from conveyor.producer import Producer
    from conveyor.tracing.latency import PollTimes
    from conveyor.tracing.tracer import Tracing

__all__ = ["Lane", "queued"]


class Lane:
    """One virtual partition: its queue, its consumer instance, the batch it runs.

    It is its consumer's ``_executor``: what the consumer asks (marking, pausing, producing,
    dead letters) goes to the partition, with marks meaning this lane's messages."""

    def __init__(self, executor: VirtualPartitionExecutor, index: int) -> None:
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
        self.executor._run_lane(self)

    def failed(self, batch: list[Any], error: Exception, started: float) -> None:
        self.executor._lane_failed(self, batch, error, started)

    def put_back(self, batch: list[Any]) -> None:
        self.queue.extendleft(reversed(batch))

    def instance(self) -> Consumer:
        consumer = self.consumer
        if consumer is None:
            consumer = self.executor._new_consumer(self)
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

    def __repr__(self) -> str:
        executor = self.executor
        return f"<Lane {executor.topic}/{executor.partition}#{self.index} queued={len(self.queue)}>"


def queued(lanes: list[Lane]) -> bool:
    """Whether a lane holds messages that wait (a tail put back, or lingering for a batch)."""
    return any(lane.queue for lane in lanes)
