"""The connector plugins Conveyor ships: its sinks as Kafka Connect configures them (a file of
lines as Connect's ``FileStreamSink``, JSON-lines files, an HTTP endpoint, a PostgreSQL table,
WebSocket and SSE clients)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

from conveyor.connect.runtime.definitions import Field, http_url, positive
from conveyor.connect.runtime.plugins import SinkConnector
from conveyor.connect.sink import Result
from conveyor.connect.sinks.files import JsonLines
from conveyor.connect.sinks.http import Webhook

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = [
    "BroadcastSinkConnector",
    "FileLines",
    "FileSinkConnector",
    "JsonLinesSinkConnector",
    "PostgresSinkConnector",
    "WebhookSinkConnector",
]


class FileLines:
    """Appends each record's value to one file as a line (UTF-8 as stored; a record without
    a value as an empty line), flushed and ``fsync``'d before its offset counts."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")  # noqa: SIM115 - kept open while the task runs

    def deliver(self, records: Sequence[Message]) -> list[Result] | None:
        data = b"".join(
            (record.raw_payload or b"").replace(b"\n", b"\\n") + b"\n" for record in records
        )
        with self._lock:
            file = self._file
            assert file is not None, "deliver() before open()"
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        return None

    def flush(self) -> None:
        """Nothing is held: each batch was written and synced as it was delivered."""

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class FileSinkConnector(SinkConnector):
    """Each record's value as a line of a file (Kafka Connect's ``FileStreamSink``; an
    embedded newline is written as ``\\n``). One task: more would interleave one file."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field(
            "file",
            "STRING",
            "The file the records' values are appended to.",
            required=True,
            importance="HIGH",
        ),
    )

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]

    def sink(self, config: Mapping[str, Any]) -> FileLines:
        return FileLines(config["file"])


class JsonLinesSinkConnector(SinkConnector):
    """Each record (topic, partition, offset, key, value, headers, timestamp) as a JSON line
    of files rotated by size (:class:`~conveyor.connect.sinks.JsonLines`)."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field(
            "directory", "STRING", "Where the files are written.", required=True, importance="HIGH"
        ),
        Field("prefix", "STRING", "The start of each file's name.", default="records"),
        Field(
            "max.bytes",
            "LONG",
            "A file this large is closed; the next record starts one.",
            default=str(64 * 1024 * 1024),
            check=positive,
        ),
    )

    def sink(self, config: Mapping[str, Any]) -> JsonLines:
        prefix = f"{config['prefix']}-task{config.get('task.id', 0)}"
        return JsonLines(config["directory"], prefix=prefix, max_bytes=config["max.bytes"])


class WebhookSinkConnector(SinkConnector):
    """Each record POSTed to a URL as JSON, a 2xx answer counting as delivered
    (:class:`~conveyor.connect.sinks.Webhook`)."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field(
            "url",
            "STRING",
            "The http:// or https:// endpoint.",
            required=True,
            importance="HIGH",
            check=http_url,
        ),
        Field("batch", "BOOLEAN", "Send a JSON array of records per request.", default="false"),
        Field("concurrency", "INT", "Requests in flight at most.", default="16", check=positive),
        Field("timeout", "DOUBLE", "Seconds a request may take.", default="5.0", check=positive),
    )

    def sink(self, config: Mapping[str, Any]) -> Webhook:
        return Webhook(
            config["url"],
            batch=config["batch"],
            concurrency=config["concurrency"],
            timeout=config["timeout"],
        )


class PostgresSinkConnector(SinkConnector):
    """Each record stored once as a row of a PostgreSQL table (``ON CONFLICT DO NOTHING`` on
    its topic, partition and offset; :class:`~conveyor.connect.sinks.Postgres`)."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field(
            "database.url",
            "PASSWORD",
            "postgresql://user:password@host:port/database.",
            required=True,
            importance="HIGH",
        ),
        Field(
            "table",
            "STRING",
            "The table the rows go to (made when missing).",
            default="kafka_records",
        ),
        Field(
            "connections",
            "INT",
            "Connections a task's lanes share, at most.",
            default="8",
            check=positive,
        ),
    )

    def sink(self, config: Mapping[str, Any]) -> Any:
        from conveyor.connect.sinks.postgres import Postgres  # noqa: PLC0415 - psycopg

        return Postgres(
            config["database.url"], table=config["table"], connections=config["connections"]
        )


class BroadcastSinkConnector(SinkConnector):
    """Each record pushed to the WebSocket (``/ws``) and SSE (``/sse``) clients subscribed to
    its key's channel (:class:`~conveyor.connect.sinks.Broadcast`). One task and one topic: a
    task serves one port."""

    fields: ClassVar[tuple[Field, ...]] = (
        Field("host", "STRING", "The address the clients connect to.", default="127.0.0.1"),
        Field(
            "port",
            "INT",
            "The port the clients connect to.",
            required=True,
            importance="HIGH",
            check=positive,
        ),
        Field(
            "queue.size",
            "INT",
            "Records held per client before a slow one is dropped.",
            default="1000",
            check=positive,
        ),
    )

    @classmethod
    def check(cls, config: dict[str, Any]) -> Mapping[str, list[str]]:
        errors = dict(super().check(config))
        if len(config.get("topics") or []) > 1:
            errors["topics"] = ["A broadcast serves one topic on its port: name one"]
        return errors

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]

    def sink(self, config: Mapping[str, Any]) -> Any:
        from conveyor.connect.sinks.broadcast import Broadcast  # noqa: PLC0415 - starlette

        return Broadcast(host=config["host"], port=config["port"], queue_size=config["queue.size"])
