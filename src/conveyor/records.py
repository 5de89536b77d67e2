"""A message as librdkafka hands it over, made in memory: what :class:`~conveyor.Message`
wraps when a test feeds a consumer or reads what was produced (``conveyor.testing``), or when
a join hands back a message it kept."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Record", "as_bytes", "raw_headers"]

TIMESTAMP_CREATE_TIME = 1  # librdkafka's kind for a timestamp the producer set


class Record:
    """The fields of one Kafka message behind librdkafka's accessor methods (``topic()``,
    ``value()``, ``timestamp()`` ...), so Conveyor's :class:`~conveyor.Message` and delivery
    handles read it as they read a real one."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._value = value
        self._key = key
        self._headers = headers or None
        self._timestamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return None if self._headers is None else list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return (TIMESTAMP_CREATE_TIME, self._timestamp)

    def error(self) -> None:
        return None

    def latency(self) -> None:
        return None

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return f"<Record {self._topic}/{self._partition}@{self._offset}>"


def as_bytes(value: bytes | str | None) -> bytes | None:
    """What Kafka stores for a value the producer accepts (text as UTF-8)."""
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def raw_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Headers as Kafka stores them: ``(name, bytes)`` pairs in order (text as UTF-8; a
    ``None`` value stays ``None``, as librdkafka hands it back)."""
    if not headers:
        return []
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(str(name), as_bytes(value)) for name, value in pairs]
