"""A record as JSON: what the file and HTTP sinks write."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.serialization import json_dumps, text_or_base64

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["encoded_record", "record_json"]


def record_json(record: Message) -> dict[str, Any]:
    """``record`` as a JSON-ready dict: where it came from, its key, headers and payload (the
    deserialized payload when it is JSON, else the raw bytes as text or base64).

    Raises:
        ValueError: the payload cannot be deserialized or encoded (the record is rejected).
    """
    payload = record.payload
    try:
        json_dumps(payload)
    except (TypeError, ValueError):
        payload = text_or_base64(record.raw_payload)
    return _document(record, payload)


def encoded_record(record: Message, encode: Callable[[Message], Any] = record_json) -> bytes:
    """``encode(record)`` as compact UTF-8 JSON. With :func:`record_json` the payload is
    encoded once, with the whole record (the sinks' own default: a check of the payload and
    then the record, with the standard library's encoder, was the largest part of a webhook's
    CPU per record); a payload that is no JSON goes as text or base64 as there.

    Raises:
        ValueError, TypeError: ``encode`` failed or made something JSON cannot hold.
    """
    if encode is not record_json:
        return json_dumps(encode(record))
    document = _document(record, record.payload)
    try:
        return json_dumps(document)
    except (TypeError, ValueError):
        document["payload"] = text_or_base64(record.raw_payload)
        return json_dumps(document)


def _document(record: Message, payload: Any) -> dict[str, Any]:
    timestamp = record.timestamp
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": None if timestamp is None else timestamp.isoformat(),
        "key": text_or_base64(record.raw_key),
        "headers": {name: text_or_base64(value) for name, value in record.raw_headers},
        "payload": payload,
    }
