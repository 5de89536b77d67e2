"""Checking and shaping one outgoing message before librdkafka sees it.

Every check raises :class:`~conveyor.errors.InvalidMessageError` naming the field,
synchronously, so a bad message never becomes a delivery failure much later.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from conveyor.errors import InvalidMessageError
from conveyor.models.encoding import encode_key_instance
from conveyor.serialization import Serializer

__all__ = [
    "MESSAGE_FIELDS",
    "Headers",
    "check_message",
    "encode_headers",
    "encode_key",
    "encode_payload",
]

Headers = Mapping[str, "str | bytes | None"] | list[tuple[str, "str | bytes | None"]]
"""Headers as a dict, or as a list of ``(name, value)`` pairs (names may repeat)."""

MESSAGE_FIELDS = frozenset(
    {"topic", "payload", "key", "headers", "partition", "partition_key", "timestamp", "label"}
)
"""The keys a message dict may have (``produce_many_*`` and middleware)."""

_TEXT = (str, bytes)


def check_topic(topic: Any) -> str:
    if type(topic) is str and topic:
        return topic
    if topic is None or topic == "":
        raise InvalidMessageError("the message has no topic", "topic")
    raise InvalidMessageError(f"topic must be a string, got {type(topic).__name__}", "topic")


def encode_payload(payload: Any, serializer: Serializer, max_bytes: int) -> bytes | str | None:
    """bytes and str pass through (str is sent as UTF-8), None is a tombstone, anything else
    goes through ``serializer``; the result must fit in ``message.max.bytes``."""
    kind = type(payload)
    if kind is not bytes and kind is not str and payload is not None:
        if isinstance(payload, bytes | bytearray | memoryview):
            payload = bytes(payload)
        else:
            try:
                payload = serializer(payload)
            except Exception as exc:
                raise InvalidMessageError(
                    f"payload of type {kind.__name__} could not be serialized: {exc}", "payload"
                ) from exc
            if not isinstance(payload, bytes | str):
                raise InvalidMessageError(
                    f"the serializer returned {type(payload).__name__}, not bytes", "payload"
                )
    if payload is not None and len(payload) * (4 if type(payload) is str else 1) > max_bytes:
        size = len(payload.encode() if type(payload) is str else payload)
        if size > max_bytes:
            raise InvalidMessageError(
                f"payload is {size:,} bytes, over message.max.bytes ({max_bytes:,})", "payload"
            )
    return cast("bytes | str | None", payload)


def encode_key(key: Any, field: str = "key") -> bytes | str | None:
    if key is None or type(key) is bytes or type(key) is str:
        return key
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    encoded = encode_key_instance(key)  # an int or UUID as text, a model as JSON
    if encoded is not None:
        return encoded
    raise InvalidMessageError(
        f"{field} must be str, bytes, an int, a UUID or a model instance, got {type(key).__name__}",
        field,
    )


def encode_headers(headers: Any) -> list[tuple[str, bytes | str | None]] | None:
    """Dict or list of pairs -> list of pairs; names must be str, values str, bytes or None."""
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        pairs = list(headers.items())
    elif isinstance(headers, list | tuple):
        pairs = list(headers)
    else:
        raise InvalidMessageError(
            f"headers must be a dict or a list of (name, value) pairs, got {type(headers).__name__}",
            "headers",
        )
    for index, pair in enumerate(pairs):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InvalidMessageError(
                f"headers[{index}] must be a (name, value) pair, got {pair!r}", "headers"
            )
        name, value = pair
        if type(name) is not str:
            raise InvalidMessageError(f"header names must be str, got {name!r}", "headers")
        if value is not None and not isinstance(value, _TEXT):
            raise InvalidMessageError(
                f"header {name!r} must be str or bytes, got {type(value).__name__}", "headers"
            )
    return [(pair[0], pair[1]) for pair in pairs]


def encode_partition(partition: Any) -> int:
    if partition is None:
        return -1
    if type(partition) is int and partition >= 0:
        return partition
    raise InvalidMessageError(f"partition must be an integer >= 0, got {partition!r}", "partition")


def encode_timestamp(timestamp: Any) -> int:
    """Milliseconds since the epoch; 0 lets librdkafka use the current time."""
    if timestamp is None:
        return 0
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None:
            raise InvalidMessageError("timestamp datetimes must be timezone-aware", "timestamp")
        return int(timestamp.timestamp() * 1000)
    if type(timestamp) is int and timestamp >= 0:
        return timestamp
    raise InvalidMessageError(
        f"timestamp must be milliseconds since the epoch or an aware datetime, got {timestamp!r}",
        "timestamp",
    )


def check_message(message: Any) -> dict[str, Any]:
    """A message dict for ``produce_many_*``: only known keys, and a topic."""
    if not isinstance(message, dict):
        raise InvalidMessageError(
            f"each message must be a dict, got {type(message).__name__}", "message"
        )
    unknown = message.keys() - MESSAGE_FIELDS
    if unknown:
        raise InvalidMessageError(
            f"unknown message field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(MESSAGE_FIELDS))}",
            sorted(unknown)[0],
        )
    return message
