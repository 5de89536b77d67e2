"""``LaneReports``: what a partition's lanes report when something goes wrong: a
``consume()`` that raised (its ``error.occurred`` event), and the log lines (one per interval
and kind for a partition that keeps failing) of a retry, a collapse, a message given up, a
partitioner that raised, and an offset that arrived twice."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog

if TYPE_CHECKING:
    from conveyor.instrumentation.monitor import Monitor
    from conveyor.processing.virtual.lane import Lane

__all__ = ["LaneReports"]

_log = logging.getLogger("conveyor.processing")
_failures = RateLimitedLog(_log)
_refused = RateLimitedLog(_log)


class LaneReports:
    """The reports of one partition's lanes (see the module)."""

    def __init__(self, topic: str, partition: int, monitor: Monitor) -> None:
        self._topic = topic
        self._partition = partition
        self._where = f"{topic}/{partition}"  # the rate limit's key
        self._monitor = monitor

    def consume_failed(
        self,
        lane: Lane,
        batch: list[Any],
        error: BaseException,
        *,
        attempt: int,
        action: str,
        collapsed: bool,
        started: float | None,
    ) -> None:
        """``lane``'s ``consume()`` of ``batch`` raised (``started``: its ``perf_counter()``;
        ``None``: it never ran), and the failure policy chose ``action``."""
        monitor = self._monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="consumer.consume.error",
                error=error,
                consumer=lane.consumer,
                topic=self._topic,
                partition=self._partition,
                virtual_partition=lane.index,
                collapsed=collapsed,
                first_offset=batch[0].offset(),
                last_offset=batch[-1].offset(),
                attempt=attempt,
                action=action,
                duration=0.0 if started is None else time.perf_counter() - started,
            )

    def retrying(self, batch: list[Any], attempt: int, delay: float, error: BaseException) -> None:
        """A collapsed partition's batch raised: it runs again in ``delay`` seconds."""
        _failures.log(
            logging.ERROR,
            self._where,
            "%s/%s: consume raised on offsets %s-%s (attempt %s, collapsed); retrying in "
            "%.1f s: %r",
            self._topic,
            self._partition,
            batch[0].offset(),
            batch[-1].offset(),
            attempt,
            delay,
            error,
        )

    def collapsing(
        self, lane: Lane, batch: list[Any], attempt: int, delay: float, error: BaseException
    ) -> None:
        """A lane's batch raised: the partition runs in one lane, in ``delay`` seconds."""
        _failures.log(
            logging.ERROR,
            self._where,
            "%s/%s: consume raised in lane %s on offsets %s-%s (attempt %s); the partition "
            "runs in one lane, in order, %s: %r",
            self._topic,
            self._partition,
            lane.index,
            batch[0].offset(),
            batch[-1].offset(),
            attempt,
            f"in {delay:.1f} s" if delay else "now",
            error,
        )

    def giving_up(self, offset: int, attempts: int, action: str, error: BaseException) -> None:
        """The message at ``offset`` is dispatched (``action``) or skipped."""
        _failures.log(
            logging.ERROR,
            f"{self._where}:give-up",
            "%s/%s: consume raised at offset %s (attempt %s); %s: %r",
            self._topic,
            self._partition,
            offset,
            attempts,
            "moving it to the dead letter queue" if action == "dispatch" else "skipping it",
            error,
        )

    def partitioner_failed(self, offset: int, error: BaseException) -> None:
        """The partitioner or the reducer raised on the message at ``offset``."""
        _failures.log(
            logging.ERROR,
            f"{self._where}:partitioner",
            "%s/%s: the virtual partitions partitioner raised at offset %s (%r); running the "
            "partition in one lane until past it",
            self._topic,
            self._partition,
            offset,
            error,
        )

    def arrived_twice(self, offset: int, last: int | None) -> None:
        """``offset`` came again after ``last`` was handed out: it is not run twice."""
        _refused.log(
            logging.WARNING,
            self._where,
            "%s/%s: offset %s arrived after offset %s was handed out; not run twice",
            self._topic,
            self._partition,
            offset,
            last,
        )
