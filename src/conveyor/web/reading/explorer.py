"""The explorer: read any topic's messages without a consumer group (never committing), from
an offset, from a time or the newest N, filter them (``explorer_query``), show one
(``message_views``), export them, republish one.

Nothing here knows HTTP: the web UI's pages and ``/api`` endpoints call it, and so can a
script. Every read is bounded: by the partition's end as it was when the read began, by the
number of messages wanted, by the number scanned and by a deadline. The reads themselves are
the iterator's bounded topic reads (``iterator.scan``), which the dead jobs' lists use too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ConfigurationError, KafkaError
from conveyor.iterator.scan import Range, Start, TopicReader
from conveyor.web.reading.explorer_query import Filters
from conveyor.web.reading.message_views import export_line, message_view

__all__ = ["TIMED_OUT", "Explorer", "Page"]

MAX_LIMIT = 100_000  # messages one export may hold
TIMED_OUT = "_TIMED_OUT"
"""The ``name`` of the :class:`KafkaError` of a read that ran out of time (librdkafka's)."""


# -- reading ------------------------------------------------------------------------------------


@dataclass
class Page:
    """One read of one partition: the matching messages (oldest first), where the read began,
    how many were scanned and the offset to go on from (``None`` at the partition's end)."""

    topic: str
    partition: int
    low: int
    high: int
    first: int
    scanned: int
    next_offset: int | None
    messages: list[dict[str, Any]]
    timed_out: bool = False


class Explorer:
    """Reads topics for the web UI with the app's kafka settings (one short-lived client per
    read, from its :class:`~conveyor.iterator.scan.TopicReader`; nothing joins a group or
    commits)."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        scan_limit: int = 20_000,
        timeout: float = 10.0,
        export_scan_limit: int = 1_000_000,
        export_timeout: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reading = TopicReader(kafka, "conveyor-web-explorer", timeout, clock)
        self.scan_limit = scan_limit
        self.export_scan_limit = export_scan_limit
        self.export_timeout = export_timeout

    @property
    def kafka(self) -> dict[str, Any]:
        """The app's kafka settings the explorer reads with."""
        return self.reading.kafka

    @property
    def timeout(self) -> float:
        """Seconds a read (other than an export) may take."""
        return self.reading.timeout

    def partitions(self, topic: str) -> list[dict[str, int]]:
        """Each partition of ``topic`` with its low and high watermarks.

        Raises:
            ConfigurationError: the topic does not exist.
        """
        reading = self.reading
        client = reading.client()
        try:
            return [
                {"partition": p, "low": low, "high": high, "messages": high - low}
                for p in reading.partitions(client, topic)
                for low, high in [client.query_watermarks(topic, p, self.timeout)]
            ]
        finally:
            client.close()

    def browse(
        self,
        topic: str,
        partition: int,
        start: Start,
        limit: int = 50,
        filters: Filters | None = None,
    ) -> Page:
        """Up to ``limit`` matching messages of one partition from ``start`` (scanning at
        most ``scan_limit``, up to the partition's end as it was when asked).

        Raises:
            ConfigurationError: no such topic or partition, or an offset past the end.
        """
        filters = filters or Filters()
        reading = self.reading
        client = reading.client()
        try:
            if partition not in reading.partitions(client, topic):
                raise ConfigurationError(f"{topic!r} has no partition {partition}", "partition")
            low, high, first = reading.first(client, topic, partition, start)
            found: list[dict[str, Any]] = []
            scanned = 0
            next_offset: int | None = first
            timed_out = False
            for raw, end in reading.read(client, [(topic, partition, first, high)]):
                if raw is None:
                    timed_out = not end
                    next_offset = None if end else next_offset
                    break
                scanned += 1
                next_offset = raw.offset() + 1
                if filters.matches(raw):
                    found.append(message_view(raw, full=False))
                if len(found) >= limit or scanned >= self.scan_limit:
                    break
            if next_offset is not None and next_offset >= high:
                next_offset = None
            return Page(topic, partition, low, high, first, scanned, next_offset, found, timed_out)
        finally:
            client.close()

    def message(self, topic: str, partition: int, offset: int) -> dict[str, Any] | None:
        """One message in full, or ``None`` when the offset holds none (deleted, compacted
        away, a transaction marker, or past the end)."""
        raw = self.raw_message(topic, partition, offset)
        return None if raw is None else message_view(raw)

    def raw_message(self, topic: str, partition: int, offset: int) -> Any | None:
        """librdkafka's message at ``offset``, or ``None`` when the offset holds none.

        Raises:
            ConfigurationError: no such partition.
            KafkaError: the read did not end within the explorer's ``timeout`` (``name``
                ``_TIMED_OUT``; not "no message": the web UI answers 504, not 404).
        """
        reading = self.reading
        client = reading.client()
        try:
            if partition not in reading.partitions(client, topic):
                raise ConfigurationError(f"{topic!r} has no partition {partition}", "partition")
            low, high = client.query_watermarks(topic, partition)
            if not low <= offset < high:
                return None
            for raw, end in reading.read(client, [(topic, partition, offset, high)]):
                if raw is None and not end:
                    raise KafkaError(
                        f"reading {topic}/{partition}@{offset} timed out: no answer within "
                        f"{self.timeout:g} s (the message may well be there: try again)",
                        name=TIMED_OUT,
                        retriable=True,
                    )
                if raw is None or raw.offset() > offset:
                    return None
                if raw.offset() == offset:
                    return raw
            return None
        finally:
            client.close()

    def scan(self, topic: str, start: Start, limit: int) -> tuple[list[Any], bool]:
        """librdkafka's messages of every partition of ``topic`` from ``start``, at most
        ``limit`` in all, and whether all were read (:meth:`TopicReader.scan
        <conveyor.iterator.scan.TopicReader.scan>`, within the explorer's ``timeout``).

        Raises:
            ConfigurationError: the topic does not exist.
        """
        return self.reading.scan(topic, start, limit)

    def export(
        self,
        topic: str,
        partitions: Iterable[int] | None,
        start: Start,
        filters: Filters | None = None,
        limit: int = 10_000,
    ) -> Iterator[bytes]:
        """The matching messages as JSON lines, partition after partition, at most ``limit``
        (a generator, streamed as read; the topic, partitions and start are checked before
        it is returned). A read is bounded: ``export_scan_limit`` messages scanned and
        ``export_timeout`` seconds in all; one cut short ends with a line
        ``{"export": {"complete": false, "reason": ...}}``. The generator also yields empty
        chunks while it scans without a match, so that a server notices a client that left.

        Raises:
            ConfigurationError: no such topic, a partition it does not have, an offset past
                the end, or a bad limit.
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise ConfigurationError(f"limit must be 1 to {MAX_LIMIT:,}, not {limit}", "limit")
        filters = filters or Filters()
        reading = self.reading
        client = reading.client()
        try:
            known = reading.partitions(client, topic)
            chosen = known if partitions is None else list(partitions)
            missing = sorted(set(chosen) - set(known))
            if missing:
                raise ConfigurationError(
                    f"{topic!r} has no partition {', '.join(map(str, missing))}", "partition"
                )
            ranges = []
            for partition in chosen:
                _low, high, first = reading.first(client, topic, partition, start)
                if first < high:
                    ranges.append((topic, partition, first, high))
        finally:
            client.close()
        return self._export_lines(ranges, filters, limit)

    def _export_lines(self, ranges: list[Range], filters: Filters, limit: int) -> Iterator[bytes]:
        reading = self.reading
        written = scanned = 0
        deadline = reading.clock() + self.export_timeout
        client = reading.client()  # opened by the first next(): a response never sent leaks none
        try:
            for topic, partition, first, end in ranges:  # one at a time: lines in offset order
                for raw, _end in reading.read(client, [(topic, partition, first, end)], deadline):
                    if raw is None:
                        if not _end:
                            yield _cut_short(
                                f"the export's {self.export_timeout:g} s ran out "
                                f"in {topic}/{partition}"
                            )
                            return
                        break
                    scanned += 1
                    if filters.matches(raw):
                        yield export_line(raw)
                        written += 1
                        if written >= limit:
                            return
                    elif scanned % 500 == 0:
                        yield b""  # a chance for the server to see that the client left
                    if scanned >= self.export_scan_limit:
                        yield _cut_short(
                            f"{scanned:,} messages scanned (the limit), stopped in "
                            f"{topic}/{partition} at offset {raw.offset()}"
                        )
                        return
        finally:
            client.close()


def _cut_short(reason: str) -> bytes:
    return json.dumps({"export": {"complete": False, "reason": reason}}).encode() + b"\n"
