"""JSON encoding and decoding shared by producers and consumers (orjson when installed)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from conveyor.models.encoding import encode_instance, to_builtins

__all__ = ["Serializer", "json_dumps", "json_loads", "text_or_base64"]

Serializer = Callable[[Any], bytes]
"""Turns a payload that is not ``bytes``, ``str`` or ``None`` into bytes."""

_orjson: Any
try:
    import orjson

    _orjson = orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None


_BUILTIN = frozenset({dict, list, tuple, str, int, float, bool, type(None)})


def json_dumps(value: Any) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON (orjson when installed, else the standard library);
    a model instance (pydantic, msgspec Struct, dataclass) by its own library.

    The bytes are a copy of orjson's result sized to them: orjson's own keeps the allocation
    of its working buffer (4 KB or more), so a batch's payloads or a store's writes held until
    they are sent took 4 KB each, and a page fault each as thousands were made and freed."""
    if type(value) not in _BUILTIN:
        encoded = encode_instance(value)  # a pydantic model or a msgspec Struct, by its library
        if encoded is not None:
            return encoded
    if _orjson is not None:  # (dataclasses included: orjson writes them itself)
        try:
            return b"%b" % (_orjson.dumps(value, default=to_builtins),)  # sized: see above
        except TypeError:
            pass  # e.g. integers past 64 bits: let the standard library decide
    return json.dumps(
        value, separators=(",", ":"), ensure_ascii=False, default=to_builtins
    ).encode()


_SCALARS = frozenset({str, int, bool, type(None)})


def canonical_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON with sorted object keys, the same bytes whether orjson
    is installed or not (a store's keys: what one process writes, another must find). orjson
    writes the scalars other than floats and the tuples of them as the standard library does:
    those go through it, the rest through the standard library."""
    if _orjson is not None and (
        type(value) in _SCALARS or (type(value) is tuple and _SCALARS.issuperset(map(type, value)))
    ):
        try:
            return b"%b" % (_orjson.dumps(value),)  # sized, as json_dumps' (a store's keys)
        except TypeError:
            pass  # integers past 64 bits
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def _json_loads(raw: bytes | str) -> Any:
    """Decode JSON bytes (or text)."""
    return json.loads(raw)


json_loads: Callable[[bytes | str], Any] = _orjson.loads if _orjson is not None else _json_loads
"""Decode JSON bytes (or text): orjson's own function when installed (no wrapper between it
and each payload of a batch), else the standard library's."""


def text_or_base64(value: bytes | None) -> Any:
    """Bytes as JSON can hold them: the text where they are UTF-8, else ``{"base64": ...}``
    (the sinks' records and the web UI's exports)."""
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}
