"""Bounded reads of a topic without a consumer group: each partition from where a read starts
(:class:`Start`: an offset, a time or the newest N) up to its end as it was when the read
began, within a deadline, by a short-lived client that assigns the partitions itself and
never commits (:class:`TopicReader`).

The features that look at what a topic holds read through it: the web UI's explorer (pages,
exports, the dead letter queues) and the dead jobs' lists (``jobs.dead``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConfigurationError

__all__ = ["Range", "Start", "TopicReader", "parse_time", "reader_settings"]

Range = tuple[str, int, int, int]
"""(topic, partition, first offset to read, end: the partition's high watermark)."""


def reader_settings(kafka: Mapping[str, Any], group_id: str) -> dict[str, Any]:
    """The app's kafka settings for a reader that assigns partitions itself and never
    commits (``group_id`` only names it in the broker's logs)."""
    return {
        **{
            k: v
            for k, v in kafka.items()
            if not k.startswith(("group.", "transactional.", "enable.auto."))
        },
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }


@dataclass(frozen=True)
class Start:
    """Where a read begins: ``kind`` is ``offset`` (``value`` the offset), ``time``
    (``value`` epoch seconds: the first message at or after it) or ``newest`` (``value``:
    the last N messages of each partition)."""

    kind: str
    value: float

    @classmethod
    def parse(cls, offset: str | None, when: str | None, newest: str | None) -> Start:
        """From a form's fields (at most one set; none: the newest 50).

        Raises:
            ConfigurationError: a malformed number or time, or more than one given.
        """
        given = [
            (name, value)
            for name, value in (("offset", offset), ("time", when), ("newest", newest))
            if value not in (None, "")
        ]
        if len(given) > 1:
            raise ConfigurationError(
                "give one of offset, time and newest, not " + " and ".join(n for n, _ in given),
                given[0][0],
            )
        if not given:
            return cls("newest", 50)
        name, text = given[0]
        assert text is not None
        if name == "time":
            return cls("time", parse_time(text).timestamp())
        try:
            number = int(text)
        except ValueError:
            raise ConfigurationError(f"{name} must be a whole number, not {text!r}", name) from None
        if number < 0 or (name == "newest" and number == 0):
            raise ConfigurationError(f"{name} must be above 0, not {number}", name)
        return cls(name, number)

    def describe(self) -> str:
        """Where the read begins, in words (``from offset 12``, ``the newest 50``)."""
        if self.kind == "offset":
            return f"from offset {int(self.value)}"
        if self.kind == "time":
            return f"from {datetime.fromtimestamp(self.value, UTC):%Y-%m-%d %H:%M:%S} UTC"
        return f"the newest {int(self.value)}"


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; without a zone it is UTC.

    Raises:
        ConfigurationError: not an ISO 8601 time.
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigurationError(
            f"time {text!r} is not an ISO 8601 time (like 2026-11-25T10:00:00+00:00)", "time"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class TopicReader:
    """Reads topics with ``kafka`` (the app's settings), one short-lived client per read
    (``client()``, named ``name`` in the broker's logs): nothing joins a group or commits.
    A read that is not given a deadline ends ``timeout`` seconds after it began; ``clock``
    is the clock deadlines are kept by."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        name: str,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kafka = dict(kafka)
        self.name = name
        self.timeout = timeout
        self.clock = clock

    def client(self) -> ConsumerClient:
        """A new client to read with (the caller closes it)."""
        # partition EOF: a read ends at the end even when the last offsets hold no message
        # (transaction markers, compacted away)
        return ConsumerClient(
            {**reader_settings(self.kafka, self.name), "enable.partition.eof": True}
        )

    def partitions(self, client: ConsumerClient, topic: str) -> list[int]:
        """The partition ids of ``topic``.

        Raises:
            ConfigurationError: the topic does not exist.
        """
        known = client.partitions(topic, self.timeout)
        if not known:
            raise ConfigurationError(f"topic {topic!r} does not exist", "topic")
        return known

    def first(
        self, client: ConsumerClient, topic: str, partition: int, start: Start
    ) -> tuple[int, int, int]:
        """(low, high, first offset to read) of a partition for ``start``.

        Raises:
            ConfigurationError: an offset past the partition's end.
        """
        low, high = client.query_watermarks(topic, partition)
        if start.kind == "offset":
            offset = int(start.value)
            if offset > high:
                raise ConfigurationError(
                    f"offset {offset} is past the end of {topic}/{partition} (its next offset "
                    f"is {high})",
                    "offset",
                )
            return low, high, max(offset, low)
        if start.kind == "time":
            found = client.offset_for_time(topic, partition, int(start.value * 1000))
            return low, high, found if found >= 0 else high
        return low, high, max(low, high - int(start.value))

    def scan(self, topic: str, start: Start, limit: int) -> tuple[list[Any], bool]:
        """librdkafka's messages of every partition of ``topic`` from ``start``, at most
        ``limit`` in all (oldest first per partition), and whether all were read (False when
        the limit or the deadline cut the read short).

        Raises:
            ConfigurationError: the topic does not exist.
        """
        client = self.client()
        try:
            ranges = []
            for partition in self.partitions(client, topic):
                _low, high, first = self.first(client, topic, partition, start)
                ranges.append((topic, partition, first, high))
            found: list[Any] = []
            for raw, end in self.read(client, ranges):
                if raw is None:
                    return found, end
                found.append(raw)
                if len(found) >= limit:
                    return found, False
            return found, True
        finally:
            client.close()

    def read(
        self, client: ConsumerClient, ranges: list[Range], deadline: float | None = None
    ) -> Iterator[tuple[Any, bool]]:
        """(message, False) for each message of the ranges (topic, partition, first, end)
        in order, then ``(None, True)`` when all ends were reached, or ``(None, False)`` at
        the deadline (``timeout`` from now unless given). A partition ends at its ``end``,
        at its EOF, or at the first message past ``end`` (its last offsets may hold no
        message: transaction markers, compacted away)."""
        pending = {(t, p): end for t, p, first, end in ranges if first < end}
        if not pending:
            yield None, True
            return
        client.assign([(t, p, first) for t, p, first, end in ranges if first < end])
        if deadline is None:
            deadline = self.clock() + self.timeout
        while pending:
            left = deadline - self.clock()
            if left <= 0:
                yield None, False
                return
            for raw in client.poll_batch(min(left, 0.5), 500):
                where = (raw.topic(), raw.partition())
                if raw.error() is not None:
                    client.fetch_error(raw)  # raises KafkaError unless it marks the end
                    pending.pop(where, None)
                    continue
                end = pending.get(where)
                if end is None:
                    continue
                if raw.offset() >= end:
                    del pending[where]
                    continue
                yield raw, False
                if raw.offset() >= end - 1:
                    del pending[where]
        yield None, True
