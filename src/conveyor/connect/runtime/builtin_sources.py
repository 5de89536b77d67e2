"""The source connectors Conveyor ships: a file's lines as Kafka Connect's
``FileStreamSource`` reads them (followed as the file grows, the byte position as offset),
an HTTP resource polled, and PostgreSQL change data capture through logical replication."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import IO, Any, ClassVar

from conveyor.connect.runtime.definitions import Field, http_url, one_of, positive
from conveyor.connect.runtime.plugins import (
    SourceConnector,
    SourceOffsets,
    SourceRecord,
    SourceTask,
)
from conveyor.serialization import json_dumps

__all__ = [
    "FileLinesSource",
    "FileSourceConnector",
    "HttpPollingSource",
    "HttpPollingSourceConnector",
    "PostgresCdcConnector",
]

_log = logging.getLogger("conveyor.connect")

_CHUNK = 1 << 20


class FileLinesSource(SourceTask):
    """Each complete line of ``path`` (without its newline) as one record of ``topic``; the
    byte position after it is its offset, so a restarted task goes on after the last line
    written. A line still being written (no newline yet) waits for its end."""

    def __init__(self, path: str, topic: str, batch_size: int) -> None:
        self.path = path
        self.topic = topic
        self.batch_size = batch_size
        self._partition = {"filename": path}
        self._position = 0
        self._file: IO[bytes] | None = None
        self._stopped = threading.Event()

    def start(self, offsets: SourceOffsets) -> None:
        committed = offsets.get(self._partition) or {}
        self._position = int(committed.get("position", 0))

    def poll(self, timeout: float) -> list[SourceRecord]:
        records = self._read()
        if not records:
            # a file has nothing to wait on for growth (no inotify in the standard library):
            # look again after ``timeout``, or at once when stopped
            self._stopped.wait(timeout)
        return records

    def _read(self) -> list[SourceRecord]:
        file = self._file
        if file is None:
            try:
                file = self._file = open(self.path, "rb")  # noqa: SIM115 - kept open
            except FileNotFoundError:
                return []  # not there yet
        file.seek(self._position)
        records: list[SourceRecord] = []
        position = self._position
        while len(records) < self.batch_size:
            chunk = file.read(_CHUNK)
            if not chunk:
                break
            lines = chunk.split(b"\n")
            tail = lines.pop()  # after the last newline: incomplete
            for line in lines[: self.batch_size - len(records)]:
                position += len(line) + 1
                records.append(
                    SourceRecord(
                        self.topic,
                        line,
                        source_partition=self._partition,
                        source_offset={"position": position},
                    )
                )
            if tail and len(chunk) < _CHUNK:
                break  # the file ends in the middle of a line
            file.seek(position)
        self._position = position
        return records

    def stop(self) -> None:
        self._stopped.set()
        if self._file is not None:
            self._file.close()
            self._file = None


class FileSourceConnector(SourceConnector):
    """A file's lines into a topic (Kafka Connect's ``FileStreamSource``): one task."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field("file", "STRING", "The file whose lines are read.", required=True, importance="HIGH"),
        Field("topic", "STRING", "The topic the lines go to.", required=True, importance="HIGH"),
        Field(
            "batch.size",
            "INT",
            "The most lines one poll returns (one transaction).",
            default="2000",
            check=positive,
        ),
    )

    def task(self, config: Mapping[str, Any]) -> FileLinesSource:
        return FileLinesSource(config["file"], config["topic"], config["batch.size"])


class PostgresCdcConnector(SourceConnector):
    """Every change of PostgreSQL tables, read through logical replication (``pgoutput``),
    as Debezium's envelope (:mod:`conveyor.connect.sources.postgres`). The database needs
    ``wal_level=logical`` and a user with the ``REPLICATION`` attribute. One task."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field(
            "database.url",
            "PASSWORD",
            "postgresql://user:password@host:port/database (a libpq connection string).",
            required=True,
            importance="HIGH",
        ),
        Field(
            "topic.prefix",
            "STRING",
            "The topics' prefix: table schema.table goes to <prefix>.<schema>.<table>.",
            required=True,
            importance="HIGH",
        ),
        Field(
            "table.include.list",
            "LIST",
            "The tables to capture, schema.table, separated by commas (empty: every table).",
            default="",
        ),
        Field(
            "slot.name",
            "STRING",
            "The replication slot (default: conveyor_<connector>).",
            default="",
        ),
        Field(
            "publication.name",
            "STRING",
            "The publication, made if missing (default: conveyor_<connector>).",
            default="",
        ),
        Field(
            "snapshot.mode",
            "STRING",
            "initial: every existing row first (op r), then the changes; never: changes only.",
            default="initial",
            recommended=("initial", "never"),
            check=one_of("initial", "never"),
        ),
        Field(
            "batch.size",
            "INT",
            "Changes per poll at most (whole transactions always).",
            default="2000",
            check=positive,
        ),
        Field(
            "tombstones.on.delete",
            "BOOLEAN",
            "A delete is followed by a tombstone of its key (for compacted topics).",
            default="true",
        ),
    )

    def task(self, config: Mapping[str, Any]) -> SourceTask:
        from conveyor.connect.sources.postgres import PostgresChanges  # noqa: PLC0415 - psycopg

        own = re.sub(r"[^a-z0-9_]", "_", f"conveyor_{config['name']}".lower())
        return PostgresChanges(
            url=config["database.url"],
            prefix=config["topic.prefix"],
            tables=config["table.include.list"],
            slot=config["slot.name"] or own,
            publication=config["publication.name"] or own,
            snapshot=config["snapshot.mode"] == "initial",
            batch_size=config["batch.size"],
            tombstones=config["tombstones.on.delete"],
        )


class HttpPollingSource(SourceTask):
    """GETs ``url`` every ``interval`` seconds; a JSON array answer is one record per element
    (keyed by ``key_field`` of each when given), any other answer one record. The answer's
    ``ETag`` and ``Last-Modified`` are the offset: the next request asks for a newer answer
    only (``If-None-Match`` / ``If-Modified-Since``), so an unchanged resource, before or after
    a restart, writes nothing again."""

    def __init__(
        self, url: str, topic: str, interval: float, key_field: str, headers: list[str]
    ) -> None:
        self.url, self.topic, self.interval, self.key_field = url, topic, interval, key_field
        self.headers = {
            name.strip(): value.strip()
            for name, value in (item.split(":", 1) for item in headers if ":" in item)
        }
        self._partition = {"url": url}
        self._validators: dict[str, str] = {}
        self._due = 0.0
        self._stopped = threading.Event()

    def start(self, offsets: SourceOffsets) -> None:
        self._validators = dict(offsets.get(self._partition) or {})

    def poll(self, timeout: float) -> list[SourceRecord]:
        wait = self._due - time.monotonic()
        if wait > 0:
            self._stopped.wait(min(wait, timeout))  # until the next request is due, or stopped
            return []
        self._due = time.monotonic() + self.interval
        request = urllib.request.Request(self.url, headers=self.headers)
        if "etag" in self._validators:
            request.add_header("If-None-Match", self._validators["etag"])
        if "last_modified" in self._validators:
            request.add_header("If-Modified-Since", self._validators["last_modified"])
        try:
            with urllib.request.urlopen(request, timeout=max(1.0, self.interval)) as answer:
                body, headers = answer.read(), answer.headers
        except urllib.error.HTTPError as error:
            if error.code == 304:
                return []  # not modified since the last answer written
            if error.code < 500 and error.code != 429:
                raise  # the request is wrong: the task fails, its trace says why
            _log.warning(
                "HTTP source %s: %s; asking again in %.1f s", self.url, error, self.interval
            )
            return []
        except OSError as error:  # unreachable, refused, timed out: asked again when due
            _log.warning(
                "HTTP source %s: %s; asking again in %.1f s", self.url, error, self.interval
            )
            return []
        validators = {
            name: value
            for name, value in (
                ("etag", headers.get("ETag")),
                ("last_modified", headers.get("Last-Modified")),
            )
            if value
        }
        offset = validators or {"fetched": time.time()}
        self._validators = validators
        return [
            SourceRecord(
                self.topic, value, key=key, source_partition=self._partition, source_offset=offset
            )
            for key, value in self._split(body)
        ]

    def _split(self, body: bytes) -> list[tuple[bytes | None, bytes]]:
        try:
            parsed = json.loads(body)
        except ValueError:
            return [(None, body)]
        if not isinstance(parsed, list):
            return [(None, body)]
        out = []
        for element in parsed:
            key = None
            if (
                self.key_field
                and isinstance(element, dict)
                and element.get(self.key_field) is not None
            ):
                key = str(element[self.key_field]).encode()
            out.append((key, json_dumps(element)))
        return out

    def stop(self) -> None:
        self._stopped.set()


class HttpPollingSourceConnector(SourceConnector):
    """An HTTP resource polled into a topic (:class:`HttpPollingSource`): one task."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field(
            "url",
            "STRING",
            "The http:// or https:// resource to GET.",
            required=True,
            importance="HIGH",
            check=http_url,
        ),
        Field("topic", "STRING", "The topic the answers go to.", required=True, importance="HIGH"),
        Field(
            "poll.interval.ms",
            "LONG",
            "Milliseconds between two requests.",
            default="1000",
            check=positive,
        ),
        Field(
            "key.field",
            "STRING",
            "In a JSON array answer, the field of each element that "
            "keys its record (empty: no key).",
            default="",
        ),
        Field("headers", "LIST", "Request headers, Name:value, separated by commas.", default=""),
    )

    def task(self, config: Mapping[str, Any]) -> HttpPollingSource:
        return HttpPollingSource(
            config["url"],
            config["topic"],
            config["poll.interval.ms"] / 1000,
            config["key.field"],
            config["headers"],
        )
