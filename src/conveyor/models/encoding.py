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
    """``value`` as JSON by its own library when it is a pydantic model or a msgspec Struct;
    ``None`` otherwise (dataclasses are left to the JSON encoder, which writes them as it
    always did)."""
    kind = instance_kind(value)
    if kind == PYDANTIC:
        return bytes(value.__pydantic_serializer__.to_json(value))
    if kind == MSGSPEC:
        return bytes(sys.modules["msgspec"].json.encode(value, enc_hook=to_builtins))
    return None


def encode_key_instance(key: Any) -> bytes | str | None:
    """A key that is not text: an ``int`` or ``UUID`` as its text, a model instance as JSON;
    ``None`` when it is neither."""
    if type(key) is int or isinstance(key, uuid.UUID):
        return str(key)
    encoded = encode_instance(key)
    if encoded is None and instance_kind(key) == DATACLASS:
        encoded = json.dumps(
            dataclasses.asdict(key), separators=(",", ":"), ensure_ascii=False, default=to_builtins
        ).encode()
    return encoded


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
