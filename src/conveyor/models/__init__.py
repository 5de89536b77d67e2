"""Typed messages: payload and key models, decoded, validated and encoded by their library.

pydantic models, msgspec Structs, dataclasses and TypedDicts, declared on consumers
(``class Orders(Consumer[Order])``); produced as they are; what was wrong with an invalid
one, field by field. A call's arguments (an RPC request's, a job's) checked against its
function's type hints (``models.arguments``).

A leaf: it imports ``errors`` alone, and recognises the model libraries without importing
them (``models.kinds``), so a library loads only when an app's models use it.
"""

from __future__ import annotations

from conveyor.models.codecs import (
    FieldError,
    converter,
    decoder,
    field_errors,
    json_schema,
    key_decoder,
    model_name,
)
from conveyor.models.encoding import encode_instance, encode_key_instance
from conveyor.models.kinds import model_kind, models_in

__all__ = [
    "FieldError",
    "converter",
    "decoder",
    "encode_instance",
    "encode_key_instance",
    "field_errors",
    "json_schema",
    "key_decoder",
    "model_kind",
    "model_name",
    "models_in",
]
