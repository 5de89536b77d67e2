"""Model instances as bytes: what ``produce_*`` sends for a pydantic model, a msgspec Struct
or a dataclass (TypedDicts are dicts: JSON as any dict)."""

from __future__ import annotations

import dataclasses
import json
import sys
import uuid
from typing import Any

from conveyor.models.kinds import DATACLASS, MSGSPEC, PYDANTIC, instance_kind

__all__ = ["encode_instance", "encode_key_instance", "to_builtins"]


def encode_instance(value: Any) -> bytes | None:
    """``value`` as JSON by its own library; ``None`` when it is not a model instance."""
    kind = instance_kind(value)
    if kind == PYDANTIC:
        return bytes(value.__pydantic_serializer__.to_json(value))
    if kind == MSGSPEC:
        return bytes(sys.modules["msgspec"].json.encode(value))
    if kind == DATACLASS:
        msgspec = sys.modules.get("msgspec")
        if msgspec is not None:
            return bytes(msgspec.json.encode(value))
        return json.dumps(
            dataclasses.asdict(value), separators=(",", ":"), ensure_ascii=False, default=str
        ).encode()
    return None


def encode_key_instance(key: Any) -> bytes | str | None:
    """A key that is not text: an ``int`` or ``UUID`` as its text, a model instance as JSON;
    ``None`` when it is neither."""
    if type(key) is int or isinstance(key, uuid.UUID):
        return str(key)
    return encode_instance(key)


def to_builtins(value: Any) -> Any:
    """A model instance inside a larger value (an RPC argument, a handler's result) as the
    dicts and lists JSON encoders take; ``TypeError`` for anything else (the JSON encoders'
    ``default`` hook)."""
    kind = instance_kind(value)
    if kind == PYDANTIC:
        return value.model_dump(mode="json")
    if kind == MSGSPEC:
        return sys.modules["msgspec"].to_builtins(value)
    if kind == DATACLASS:
        return dataclasses.asdict(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
