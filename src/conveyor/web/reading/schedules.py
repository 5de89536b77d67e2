"""What the schedules topic and the recurring tasks' topic hold, read as the explorer reads a
topic (no group joined, nothing committed), for the web UI's Schedules page.

Any process of the app may hold a pending schedule in memory, so the page asks none of them:
it folds the compacted topics themselves, as a dispatcher loading them would. The schedules
topic is read from the dispatchers' committed offsets (they commit a partition only up to
its oldest pending schedule, so nothing before them is pending), or from the start when the
group has none; every read ends at the partitions' ends as they were when it began, and is
bounded by a number of messages and a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConveyorError
from conveyor.schedules.records import TaskRecords, fold_record
from conveyor.schedules.wire import KEY, cancels, scheduled_for
from conveyor.web.reading.data import reader_settings

__all__ = ["PendingSchedules", "ScheduleReader", "ScheduledMessage"]


@dataclass(frozen=True)
class ScheduledMessage:
    """One pending scheduled message: its id, destination (topic and, when given,
    partition), due time (epoch seconds), key, payload size, and where it is stored."""

    id: str
    topic: str
    at: float
    key: str | None
    partition: int | None
    size: int
    stored_partition: int
    stored_offset: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "topic": self.topic,
            "at": self.at,
            "key": self.key,
            "partition": self.partition,
            "size": self.size,
            "stored_partition": self.stored_partition,
            "stored_offset": self.stored_offset,
        }


@dataclass
class PendingSchedules:
    """The pending schedules of a read (due first), how many records it read, and whether it
    read every partition to its end (``False``: cut by the limit or the deadline)."""

    messages: list[ScheduledMessage] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True
    missing: bool = False
    """The topic does not exist (nothing was ever scheduled into it)."""


class ScheduleReader:
    """Reads the schedules and recurring tasks' topics with the app's kafka settings."""

    def __init__(
        self, kafka: Mapping[str, Any], scan_limit: int = 500_000, timeout: float = 15.0
    ) -> None:
        self.kafka = dict(kafka)
        self.scan_limit = scan_limit
        self.timeout = timeout

    def pending(self, topic: str, group: str | None = None) -> PendingSchedules:
        """The schedules of ``topic`` not yet sent nor cancelled; ``group`` is the consumer
        group of the app's dispatchers (where its committed offsets say to begin)."""
        read = PendingSchedules()
        found: dict[tuple[int, str], ScheduledMessage] = {}
        for raw in self._records(topic, group, read):
            partition, offset = raw.partition(), raw.offset()
            schedule_id = (raw.key() or b"").decode("utf-8", "replace")
            headers = dict(raw.headers() or ())
            if raw.value() is None:
                current = found.get((partition, schedule_id))
                if cancels(headers, None if current is None else current.stored_offset):
                    found.pop((partition, schedule_id), None)
                continue
            due = scheduled_for(headers)
            if due is None:
                continue
            at, target, target_partition = due
            key = headers.get(KEY)
            found[(partition, schedule_id)] = ScheduledMessage(
                schedule_id, target, at, None if key is None else key.decode("utf-8", "replace"),
                target_partition, len(raw.value() or b""), partition, offset,
            )  # fmt: skip
        read.messages = sorted(found.values(), key=lambda m: (m.at, m.id))
        return read

    def recurring(self, topic: str) -> tuple[dict[str, TaskRecords], PendingSchedules]:
        """What the recurring tasks' topic holds about each task, and how the read went (its
        ``messages`` empty)."""
        read = PendingSchedules()
        tasks: dict[str, TaskRecords] = {}
        for raw in self._records(topic, None, read):
            fold_record(tasks, raw.key(), raw.value())
        return tasks, read

    def _records(self, topic: str, group: str | None, read: PendingSchedules) -> Iterator[Any]:
        """Every record of ``topic`` from the group's committed offsets (else the start) to
        the ends as they were at the start, within the limits (``read`` says how it went)."""
        client = ConsumerClient(
            {**reader_settings(self.kafka, group or "conveyor-web-schedules"),
             "enable.partition.eof": True}
        )  # fmt: skip
        try:
            partitions = client.partitions(topic)
            if not partitions:
                read.missing = True
                return
            committed: dict[tuple[str, int], int] = {}
            if group is not None:
                try:
                    positions = client.committed([(topic, p) for p in partitions], 10.0)
                    committed = {key: position.offset for key, position in positions.items()}
                except ConveyorError:
                    committed = {}  # read everything: slower, not wrong
            ends: dict[int, int] = {}
            starts = []
            for partition in partitions:
                low, high = client.query_watermarks(topic, partition)
                start = min(max(low, committed.get((topic, partition), low)), high)
                if start < high:
                    ends[partition] = high
                    starts.append((topic, partition, start))
            if not starts:
                return
            client.assign(starts)
            deadline = time.monotonic() + self.timeout
            while ends:
                if read.scanned >= self.scan_limit or time.monotonic() > deadline:
                    read.complete = False
                    return
                for raw in client.poll_batch(min(0.5, self.timeout), 1000):
                    partition = raw.partition()
                    if raw.error() is not None:
                        if client.fetch_error(raw):  # the end of a partition
                            ends.pop(partition, None)
                        continue
                    if partition not in ends or raw.offset() >= ends[partition]:
                        continue
                    read.scanned += 1
                    yield raw
                    if raw.offset() + 1 >= ends[partition]:
                        ends.pop(partition)
        finally:
            client.close()
