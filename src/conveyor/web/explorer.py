"""The explorer: read any topic's messages without a consumer group (never committing), from
an offset, from a time or the newest N, filter them, show one, export them, republish one.

Nothing here knows HTTP: the web UI's pages and ``/api`` endpoints call it, and so can a
script. Every read is bounded: by the partition's end as it was when the read began, by the
number of messages wanted, by the number scanned and by a deadline.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConfigurationError
from conveyor.web.data import reader_settings

__all__ = [
    "Explorer",
    "Filters",
    "Page",
    "Start",
    "message_view",
    "parse_time",
]

PREVIEW = 160  # characters of a payload shown in a listing
HEX_LIMIT = 4096  # bytes of a binary payload shown as hex
MAX_LIMIT = 100_000  # messages one export may hold
_JSON_PATH = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]|\.(\d+)")


# -- what to read -------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Filters:
    """What a message must match to be shown or exported (all given ones): ``key`` is a
    substring of the key, ``header`` a header name (with ``header_value``: a substring of
    its value), ``contains`` a substring of the payload, ``json_path`` a path into the JSON
    payload (``$.order.items[0].sku`` or ``order.items.0.sku``) that must exist (with
    ``json_value``: equal it, compared as text, or as JSON for numbers, booleans and null).
    """

    key: str | None = None
    header: str | None = None
    header_value: str | None = None
    contains: str | None = None
    json_path: str | None = None
    json_value: str | None = None
    _path: tuple[str | int, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def parse(cls, values: Mapping[str, str | None]) -> Filters:
        """From a form's fields; empty ones are left out.

        Raises:
            ConfigurationError: a malformed JSON path, or a value without what it qualifies.
        """
        given = {
            name: values.get(name) or None
            for name in ("key", "header", "header_value", "contains", "json_path", "json_value")
        }
        if given["header_value"] is not None and given["header"] is None:
            raise ConfigurationError("header_value needs a header name", "header_value")
        if given["json_value"] is not None and given["json_path"] is None:
            raise ConfigurationError("json_value needs a json_path", "json_value")
        path = parse_json_path(given["json_path"]) if given["json_path"] else ()
        return cls(**given, _path=path)

    @property
    def active(self) -> bool:
        return any(
            value is not None for value in (self.key, self.header, self.contains, self.json_path)
        )

    def as_query(self) -> dict[str, str]:
        """The filters as form fields (for links and the export's URL)."""
        return {
            name: value
            for name, value in (
                ("key", self.key),
                ("header", self.header),
                ("header_value", self.header_value),
                ("contains", self.contains),
                ("json_path", self.json_path),
                ("json_value", self.json_value),
            )
            if value is not None
        }

    def matches(self, raw: Any) -> bool:
        """Whether librdkafka's message ``raw`` matches every filter."""
        if self.key is not None:
            key = raw.key()
            if key is None or self.key.encode() not in key:
                return False
        if self.header is not None:
            wanted = self.header_value.encode() if self.header_value is not None else None
            if not any(
                name == self.header and (wanted is None or (value is not None and wanted in value))
                for name, value in raw.headers() or ()
            ):
                return False
        value = raw.value()
        if self.contains is not None and (value is None or self.contains.encode() not in value):
            return False
        if self._path:
            try:
                found = _walk(json.loads(value), self._path)
            except (ValueError, TypeError, LookupError):
                return False
            if self.json_value is not None and not _equal(found, self.json_value):
                return False
        return True


def parse_json_path(text: str) -> tuple[str | int, ...]:
    """``$.a.b[0]`` / ``a.b.0`` / ``$["odd key"]`` as (a, b, 0).

    Raises:
        ConfigurationError: not a path this understands.
    """
    rest = text.strip()
    rest = rest[1:] if rest.startswith("$") else rest
    steps: list[str | int] = []
    position = 0
    while position < len(rest):
        match = _JSON_PATH.match(rest, position)
        if match is None or match.end() == position:
            raise ConfigurationError(
                f"json_path {text!r} is not a path like $.order.items[0].sku", "json_path"
            )
        name, index, quoted, dotted_index = match.groups()
        if name is not None:
            steps.append(name)
        elif quoted is not None:
            steps.append(quoted)
        else:
            steps.append(int(index if index is not None else dotted_index))
        position = match.end()
    if not steps:
        raise ConfigurationError(f"json_path {text!r} names nothing", "json_path")
    return tuple(steps)


def _walk(document: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(document, list):
                raise LookupError(step)
            document = document[step]
        else:
            if not isinstance(document, dict):
                raise LookupError(step)
            document = document[step]
    return document


def _equal(found: Any, wanted: str) -> bool:
    if isinstance(found, str):
        return found == wanted
    try:
        return bool(json.loads(wanted) == found) and type(json.loads(wanted)) is type(found)
    except ValueError:
        return False


# -- how a message is shown ---------------------------------------------------------------------


def _bytes_view(value: bytes | None) -> dict[str, Any]:
    """Bytes as text when they are UTF-8, else as hex; always with their length."""
    if value is None:
        return {"kind": "null", "size": 0, "text": None}
    try:
        return {"kind": "text", "size": len(value), "text": value.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "kind": "binary",
            "size": len(value),
            "text": None,
            "hex": value[:HEX_LIMIT].hex(" "),
            "truncated": len(value) > HEX_LIMIT,
        }


def _payload_view(value: bytes | None) -> dict[str, Any]:
    view = _bytes_view(value)
    if view["kind"] == "text":
        try:
            document = json.loads(view["text"])
        except ValueError:
            pass
        else:
            view["kind"] = "json"
            view["pretty"] = json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False)
    elif view["kind"] == "null":
        view["pretty"] = None
    return view


def message_view(raw: Any, full: bool = True) -> dict[str, Any]:
    """A message as plain data for a page or JSON: where it is, when, its key, headers and
    payload (raw and decoded). ``full=False`` keeps a short preview of the payload."""
    kind, stamp = raw.timestamp()
    payload = _payload_view(raw.value())
    if not full:
        text = payload.get("text")
        preview = text if text is not None else payload.get("hex", "")
        payload = {
            "kind": payload["kind"],
            "size": payload["size"],
            "preview": (preview or "")[:PREVIEW],
            "cut": len(preview or "") > PREVIEW,
        }
    return {
        "topic": raw.topic(),
        "partition": raw.partition(),
        "offset": raw.offset(),
        "timestamp": stamp / 1000 if kind and stamp >= 0 else None,
        "timestamp_type": {1: "create", 2: "log append"}.get(kind, "none"),
        "key": _bytes_view(raw.key()),
        "headers": [{"name": name, **_bytes_view(value)} for name, value in raw.headers() or ()],
        "payload": payload,
    }


def export_line(raw: Any) -> bytes:
    """One message as a JSON line of the export: text where the bytes are UTF-8, else
    ``{"base64": ...}``; the payload as JSON where it is JSON."""

    def text_or_base64(value: bytes | None) -> Any:
        if value is None:
            return None
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}

    value = raw.value()
    payload = text_or_base64(value)
    if isinstance(payload, str):
        try:
            payload = {"json": json.loads(payload)}
        except ValueError:
            payload = {"text": payload}
    kind, stamp = raw.timestamp()
    line = {
        "topic": raw.topic(),
        "partition": raw.partition(),
        "offset": raw.offset(),
        "timestamp": stamp if kind else None,
        "key": text_or_base64(raw.key()),
        "headers": [[name, text_or_base64(v)] for name, v in raw.headers() or ()],
        "payload": payload,
    }
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


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
    read; nothing joins a group or commits)."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        scan_limit: int = 20_000,
        timeout: float = 10.0,
        export_scan_limit: int = 1_000_000,
        export_timeout: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kafka = dict(kafka)
        self.scan_limit = scan_limit
        self.timeout = timeout
        self.export_scan_limit = export_scan_limit
        self.export_timeout = export_timeout
        self._clock = clock

    def _client(self) -> ConsumerClient:
        # partition EOF: a read ends at the end even when the last offsets hold no message
        # (transaction markers, compacted away)
        return ConsumerClient(
            {**reader_settings(self.kafka, "conveyor-web-explorer"), "enable.partition.eof": True}
        )

    def partitions(self, topic: str) -> list[dict[str, int]]:
        """Each partition of ``topic`` with its low and high watermarks.

        Raises:
            ConfigurationError: the topic does not exist.
        """
        client = self._client()
        try:
            return [
                {"partition": p, "low": low, "high": high, "messages": high - low}
                for p in self._known(client, topic)
                for low, high in [client.query_watermarks(topic, p)]
            ]
        finally:
            client.close()

    @staticmethod
    def _known(client: ConsumerClient, topic: str) -> list[int]:
        known = client.partitions(topic)
        if not known:
            raise ConfigurationError(f"topic {topic!r} does not exist", "topic")
        return known

    def _first(
        self, client: ConsumerClient, topic: str, partition: int, start: Start
    ) -> tuple[int, int, int]:
        """(low, high, first offset to read) of a partition for ``start``."""
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
        client = self._client()
        try:
            if partition not in self._known(client, topic):
                raise ConfigurationError(f"{topic!r} has no partition {partition}", "partition")
            low, high, first = self._first(client, topic, partition, start)
            found: list[dict[str, Any]] = []
            scanned = 0
            next_offset: int | None = first
            timed_out = False
            for raw, end in self._read(client, [(topic, partition, first, high)]):
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
        client = self._client()
        try:
            if partition not in self._known(client, topic):
                raise ConfigurationError(f"{topic!r} has no partition {partition}", "partition")
            low, high = client.query_watermarks(topic, partition)
            if not low <= offset < high:
                return None
            for raw, _end in self._read(client, [(topic, partition, offset, high)]):
                if raw is None or raw.offset() > offset:
                    return None
                if raw.offset() == offset:
                    return raw
            return None
        finally:
            client.close()

    def scan(self, topic: str, start: Start, limit: int) -> tuple[list[Any], bool]:
        """librdkafka's messages of every partition of ``topic`` from ``start``, at most
        ``limit`` in all (oldest first per partition), and whether all were read (False when
        the limit or the deadline cut the read short).

        Raises:
            ConfigurationError: the topic does not exist.
        """
        client = self._client()
        try:
            ranges = []
            for partition in self._known(client, topic):
                _low, high, first = self._first(client, topic, partition, start)
                ranges.append((topic, partition, first, high))
            found: list[Any] = []
            for raw, end in self._read(client, ranges):
                if raw is None:
                    return found, end
                found.append(raw)
                if len(found) >= limit:
                    return found, False
            return found, True
        finally:
            client.close()

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
        client = self._client()
        try:
            known = self._known(client, topic)
            chosen = known if partitions is None else list(partitions)
            missing = sorted(set(chosen) - set(known))
            if missing:
                raise ConfigurationError(
                    f"{topic!r} has no partition {', '.join(map(str, missing))}", "partition"
                )
            ranges = []
            for partition in chosen:
                _low, high, first = self._first(client, topic, partition, start)
                if first < high:
                    ranges.append((topic, partition, first, high))
        finally:
            client.close()
        return self._export_lines(ranges, filters, limit)

    def _export_lines(
        self, ranges: list[tuple[str, int, int, int]], filters: Filters, limit: int
    ) -> Iterator[bytes]:
        written = scanned = 0
        deadline = self._clock() + self.export_timeout
        client = self._client()  # opened by the first next(): a response never sent leaks none
        try:
            for topic, partition, first, end in ranges:  # one at a time: lines in offset order
                for raw, _end in self._read(client, [(topic, partition, first, end)], deadline):
                    if raw is None:
                        if not _end:
                            yield _cut_short(f"the export's {self.export_timeout:g} s ran out "
                                             f"in {topic}/{partition}")  # fmt: skip
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

    def _read(
        self,
        client: ConsumerClient,
        ranges: list[tuple[str, int, int, int]],
        deadline: float | None = None,
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
            deadline = self._clock() + self.timeout
        while pending:
            left = deadline - self._clock()
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


def _cut_short(reason: str) -> bytes:
    return json.dumps({"export": {"complete": False, "reason": reason}}).encode() + b"\n"
