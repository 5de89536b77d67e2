"""``JsonLines``: records appended to JSON-lines files, fsync'd before their offsets are marked,
rotated by size or age."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from conveyor.connect.sink import Reject, Result
from conveyor.connect.sinks.records import encoded_record, record_json

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["JsonLines"]


class JsonLines:
    """Appends each record as one JSON line to ``directory/<prefix>-<start time>-<n>.jsonl``.

    Each batch is written, flushed and ``fsync``'d before ``deliver`` returns, so a record
    whose offset is committed is on disk. A new file starts when the current one passed
    ``max_bytes`` or ``max_age`` seconds. ``encode(record) -> dict`` shapes a line (default:
    :func:`~conveyor.connect.sinks.records.record_json`); a record it cannot encode is
    rejected (to the dead letter queue, with the reason).

    Args:
        directory: where the files go (created when missing).
        prefix: the start of each file's name.
        max_bytes: a file this large is closed and the next record starts a new one.
        max_age: seconds after which a file is closed likewise (``None``: no age limit).
        encode: shapes a line, ``encode(record) -> dict``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = "records",
        max_bytes: int = 64 * 1024 * 1024,
        max_age: float | None = None,
        encode: Callable[[Message], Any] = record_json,
    ) -> None:
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._encode = encode
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._opened_at = 0.0
        self._written = 0
        self._sequence = 0

    @property
    def path(self) -> Path | None:
        """The file written now (``None`` before the first record)."""
        return None if self._file is None else Path(self._file.name)

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        results: list[Result] = []
        lines = []
        for record in records:
            try:
                line = encoded_record(record, self._encode)
            except Exception as error:
                results.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))
                continue
            lines.append(line + b"\n")
            results.append(None)
        if lines:
            with self._lock:
                file = self._current()
                data = b"".join(lines)
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
                self._written += len(data)
        return results

    def _current(self) -> IO[bytes]:
        file = self._file
        now = time.time()
        if file is not None and (
            self._written >= self.max_bytes
            or (self.max_age is not None and now - self._opened_at >= self.max_age)
        ):
            file.close()
            file = self._file = None
        if file is None:
            self._sequence += 1
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
            name = f"{self.prefix}-{stamp}-{os.getpid()}-{self._sequence}.jsonl"
            file = self._file = open(self.directory / name, "ab")  # noqa: SIM115 - kept open
            self._opened_at, self._written = now, 0
        return file

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
