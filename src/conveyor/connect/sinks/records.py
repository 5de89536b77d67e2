"""A record as JSON: what the file and HTTP sinks write."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["record_json"]


def _text_or_base64(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}


def record_json(record: Message) -> dict[str, Any]:
    """``record`` as a JSON-ready dict: where it came from, its key, headers and payload (the
    deserialized payload when it is JSON, else the raw bytes as text or base64).

    Raises:
        ValueError: the payload cannot be deserialized or encoded (the record is rejected).
    """
    payload = record.payload
    try:
        json.dumps(payload)
    except (TypeError, ValueError):
        payload = _text_or_base64(record.raw_payload)
    timestamp = record.timestamp
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": None if timestamp is None else timestamp.isoformat(),
        "key": _text_or_base64(record.raw_key),
        "headers": {name: _text_or_base64(value) for name, value in record.raw_headers},
        "payload": payload,
    }
