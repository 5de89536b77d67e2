"""The connector plugins Conveyor ships: its sinks as Kafka Connect configures them (a file of
lines as Connect's ``FileStreamSink``, JSON-lines files, an HTTP endpoint)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

from conveyor.connect.runtime.definitions import Field
from conveyor.connect.runtime.plugins import SinkConnector
from conveyor.connect.sink import Result
from conveyor.connect.sinks.files import JsonLines
from conveyor.connect.sinks.http import Webhook

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["FileLines", "FileSinkConnector", "JsonLinesSinkConnector", "WebhookSinkConnector"]


def _positive(value: Any) -> str | None:
    return None if value > 0 else "Value must be positive"


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
            check=_positive,
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
            "url", "STRING", "The http:// or https:// endpoint.", required=True, importance="HIGH"
        ),
        Field("batch", "BOOLEAN", "Send a JSON array of records per request.", default="false"),
        Field("concurrency", "INT", "Requests in flight at most.", default="16", check=_positive),
        Field("timeout", "DOUBLE", "Seconds a request may take.", default="5.0", check=_positive),
    )

    @classmethod
    def check(cls, config: dict[str, Any]) -> Mapping[str, list[str]]:
        errors = dict(super().check(config))
        if not str(config.get("url", "")).startswith(("http://", "https://")):
            errors["url"] = ["Value must be an http:// or https:// URL"]
        return errors

    def sink(self, config: Mapping[str, Any]) -> Webhook:
        return Webhook(
            config["url"],
            batch=config["batch"],
            concurrency=config["concurrency"],
            timeout=config["timeout"],
        )
