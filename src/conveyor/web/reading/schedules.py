"""What the schedules topic and the recurring tasks' topic hold, read as the explorer reads a
topic (no group joined, nothing committed), for the web UI's Schedules page.

Any process of the app may hold a pending schedule in memory, so the page asks none of them:
it folds the compacted topics themselves, as a dispatcher loading them would. The schedules
topic is first read from the dispatchers' committed offsets (they commit a partition only up
to its oldest pending schedule, so nothing before them is pending), or from the start when
the group has none. The reader keeps what it folded and where each partition's read stopped,
so the next read (the page refreshes every few seconds) reads only the records written since;
a partition whose records before that position were deleted, or that is shorter than it (the
topic made again), is read again from its start. Every read ends at the partitions' ends as
they were when it began, and is bounded by a number of messages and a deadline (a read cut
short goes on from where it stopped next time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConveyorError
from conveyor.iterator.scan import reader_settings
from conveyor.schedules.records import TaskRecords, fold_record
from conveyor.schedules.wire import KEY, cancels, scheduled_for

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


@dataclass
class _Fold:
    """What one topic's records folded into so far (``state``), and the offset each
    partition's next read begins at."""

    state: dict[Any, Any] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)


class ScheduleReader:
    """Reads the schedules and recurring tasks' topics with the app's kafka settings, keeping
    what it read: each read after the first reads only the records written since (see the
    module's docstring). Reads of one reader run one at a time."""

    def __init__(
        self, kafka: Mapping[str, Any], scan_limit: int = 500_000, timeout: float = 15.0
    ) -> None:
        self.kafka = dict(kafka)
        self.scan_limit = scan_limit
        self.timeout = timeout
        self._lock = threading.Lock()
        self._folds: dict[tuple[str, str], _Fold] = {}

    def pending(self, topic: str, group: str | None = None) -> PendingSchedules:
        """The schedules of ``topic`` not yet sent nor cancelled; ``group`` is the consumer
        group of the app's dispatchers (where its committed offsets say to begin). Its
        ``scanned`` counts the records this read read: those written since the last one."""
        read = PendingSchedules()
        with self._lock:
            fold = self._fold("pending", topic, group, read, _fold_schedule)
            read.messages = sorted(fold.state.values(), key=lambda m: (m.at, m.id))
        return read

    def recurring(self, topic: str) -> tuple[dict[str, TaskRecords], PendingSchedules]:
        """What the recurring tasks' topic holds about each task, and how the read went (its
        ``messages`` empty)."""
        read = PendingSchedules()
        with self._lock:
            fold = self._fold("recurring", topic, None, read, _fold_task)
            tasks = {name: replace(task) for name, task in fold.state.items()}
        return tasks, read

    def _fold(
        self,
        kind: str,
        topic: str,
        group: str | None,
        read: PendingSchedules,
        fold_one: Callable[[dict[Any, Any], Any], None],
    ) -> _Fold:
        """The topic's fold, brought up to date with the records written since the last read
        (a topic that does not exist: an empty one, forgotten)."""
        fold = self._folds.setdefault((kind, topic), _Fold())
        try:
            for raw in self._records(topic, group, read, fold):
                fold_one(fold.state, raw)
        finally:
            if read.missing:
                del self._folds[(kind, topic)]
        return _Fold() if read.missing else fold

    @staticmethod
    def _starts(
        client: ConsumerClient, topic: str, partitions: list[int], group: str | None, fold: _Fold
    ) -> dict[int, tuple[int, int]]:
        """Each partition's (first offset to read, end): from where the last read stopped,
        else from the group's committed offset, else from the start. A partition whose
        records before that position were deleted, or that ends before it (the topic made
        again), starts the whole fold again."""
        marks = {p: client.query_watermarks(topic, p) for p in partitions}
        if any(not low <= fold.positions.get(p, low) <= high for p, (low, high) in marks.items()):
            fold.state.clear()
            fold.positions.clear()
        new = [p for p in marks if p not in fold.positions]
        committed: dict[tuple[str, int], int] = {}
        if group is not None and new:
            try:
                positions = client.committed([(topic, p) for p in new], 10.0)
                committed = {key: position.offset for key, position in positions.items()}
            except ConveyorError:
                committed = {}  # read everything: slower, not wrong
        for partition in new:
            low, high = marks[partition]
            fold.positions[partition] = min(max(low, committed.get((topic, partition), low)), high)
        return {p: (fold.positions[p], high) for p, (_low, high) in marks.items()}

    def _records(
        self, topic: str, group: str | None, read: PendingSchedules, fold: _Fold
    ) -> Iterator[Any]:
        """The records of ``topic`` from where ``fold`` stopped to the ends as they were at
        the start, within the limits (``read`` says how it went; ``fold.positions`` move on
        with each record)."""
        client = ConsumerClient(
            {
                **reader_settings(self.kafka, group or "conveyor-web-schedules"),
                "enable.partition.eof": True,
            }
        )
        try:
            partitions = client.partitions(topic)
            if not partitions:
                read.missing = True
                return
            ranges = self._starts(client, topic, partitions, group, fold)
            ends = {p: end for p, (start, end) in ranges.items() if start < end}
            if not ends:
                return
            client.assign([(topic, p, ranges[p][0]) for p in ends])
            deadline = time.monotonic() + self.timeout
            while ends:
                if read.scanned >= self.scan_limit or time.monotonic() > deadline:
                    read.complete = False
                    return
                for raw in client.poll_batch(min(0.5, self.timeout), 1000):
                    partition = raw.partition()
                    end = ends.get(partition)
                    if raw.error() is not None:
                        if client.fetch_error(raw) and end is not None:  # the partition's end
                            fold.positions[partition] = end
                            del ends[partition]
                        continue
                    if end is None or raw.offset() >= end:
                        continue
                    read.scanned += 1
                    fold.positions[partition] = raw.offset() + 1
                    yield raw
                    if raw.offset() + 1 >= end:
                        del ends[partition]
        finally:
            client.close()


def _fold_schedule(found: dict[Any, Any], raw: Any) -> None:
    """Fold one record of the schedules topic into ``found`` (pending schedules by partition
    and id): a schedule replaces the one of its id; a tombstone ends the one it cancels."""
    partition, offset = raw.partition(), raw.offset()
    schedule_id = (raw.key() or b"").decode("utf-8", "replace")
    headers = dict(raw.headers() or ())
    if raw.value() is None:
        current = found.get((partition, schedule_id))
        if cancels(headers, None if current is None else current.stored_offset):
            found.pop((partition, schedule_id), None)
        return
    due = scheduled_for(headers)
    if due is None:
        return
    at, target, target_partition = due
    key = headers.get(KEY)
    found[(partition, schedule_id)] = ScheduledMessage(
        schedule_id,
        target,
        at,
        None if key is None else key.decode("utf-8", "replace"),
        target_partition,
        len(raw.value() or b""),
        partition,
        offset,
    )


def _fold_task(tasks: dict[Any, Any], raw: Any) -> None:
    fold_record(tasks, raw.key(), raw.value())
