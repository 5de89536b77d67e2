"""Trace context in Kafka headers: OpenTelemetry's getter and setter over a message's headers,
and a fast reader of W3C ``traceparent`` values for linking whole batches.

Kafka headers are a list of ``(name, value)`` pairs whose values are bytes (as consumed) or
str (as produced); names may repeat, and then the last one wins, as in ``Message.headers``
(a hop that appends its own ``traceparent`` to headers it copied overrides the one before).
Nothing here imports OpenTelemetry, so the parsing is usable (and testable) without the extra.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "CONTEXT_HEADERS",
    "TRACEPARENT",
    "HeadersGetter",
    "HeadersSetter",
    "format_traceparent",
    "parse_traceparent",
    "traceparent_of",
    "unsampled_traceparent",
    "without_context",
]

TRACEPARENT = "traceparent"
CONTEXT_HEADERS = frozenset({TRACEPARENT, "tracestate", "baggage"})
"""The headers the W3C trace context and baggage propagators write."""

_PATTERN = r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})((?:-.*)?)"
_TRACEPARENT = re.compile(_PATTERN, re.DOTALL)
_TRACEPARENT_BYTES = re.compile(_PATTERN.encode(), re.DOTALL)
_COMMON = r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})"  # version 00, as nearly all are
_COMMON_TEXT = re.compile(_COMMON)
_COMMON_BYTES = re.compile(_COMMON.encode())
_VERSION_00 = r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f][02468ace]"
_UNSAMPLED = re.compile(_VERSION_00)
_UNSAMPLED_BYTES = re.compile(_VERSION_00.encode())


def without_context(headers: Iterable[tuple[str, Any]] | None) -> list[tuple[str, Any]]:
    """``headers`` as a new list, without trace context (a forwarded or dead-lettered message
    carries its source's headers: the new message's context replaces them, never doubles)."""
    if not headers:
        return []
    return [pair for pair in headers if pair[0] not in CONTEXT_HEADERS]


def _text(value: Any) -> str | None:
    if type(value) is bytes:
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return None
    if type(value) is str:
        return value
    return None


class HeadersGetter:
    """OpenTelemetry's ``TextMapGetter`` over Kafka headers (a list of pairs, or ``None``).

    Of a repeated name, the last value is the one given (propagators read the first value
    of the list, and the last header wins); one that is not ASCII counts as none (a trace
    context header is ASCII by definition)."""

    def get(self, carrier: Sequence[tuple[str, Any]] | None, key: str) -> list[str] | None:
        if not carrier:
            return None
        last: Any = None
        for name, value in carrier:
            if name == key:
                last = value
        text = _text(last)
        return [text] if text else None

    def keys(self, carrier: Sequence[tuple[str, Any]] | None) -> list[str]:
        return [name for name, _value in carrier or ()]


class HeadersSetter:
    """OpenTelemetry's ``TextMapSetter`` appending to a list of Kafka header pairs."""

    def set(self, carrier: list[tuple[str, Any]], key: str, value: str) -> None:
        carrier.append((key, value))


def traceparent_of(headers: Sequence[tuple[str, Any]] | None) -> tuple[int, int, int] | None:
    """The ``(trace id, span id, flags)`` of the last ``traceparent`` header, or ``None``
    (none, or the last one malformed)."""
    if not headers:
        return None
    found: Any = None
    for name, value in headers:
        if name == TRACEPARENT:
            found = value
    return parse_traceparent(found)


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """A W3C ``traceparent`` value (version 00)."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def parse_traceparent(value: str | bytes | None) -> tuple[int, int, int] | None:
    """W3C ``version-traceid-spanid-flags``; ``None`` for anything malformed.

    Follows the specification's rules: lower-case hex fields of 2, 32, 16 and 2 digits,
    version ``ff`` invalid, all-zero trace and span ids invalid, version ``00`` exactly 55
    characters long, later versions allowed to append ``-``-separated fields."""
    match: re.Match[Any] | None
    common: Any  # the value's type of pattern (str or bytes): mypy cannot follow that pairing
    general: Any
    if type(value) is bytes:
        common, general = _COMMON_BYTES, _TRACEPARENT_BYTES
    elif type(value) is str:
        common, general = _COMMON_TEXT, _TRACEPARENT
    else:
        return None
    match = common.fullmatch(value)  # version 00: one match, no version rules left to check
    if match is not None:
        trace_id, span_id, flags = match.groups()
        trace, span = int(trace_id, 16), int(span_id, 16)
        return (trace, span, int(flags, 16)) if trace and span else None
    match = general.fullmatch(value)
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version in ("ff", b"ff") or (rest and version in ("00", b"00")):
        return None
    trace = int(trace_id, 16)
    span = int(span_id, 16)
    if not trace or not span:
        return None
    return trace, span, int(flags, 16)


def unsampled_traceparent(value: str | bytes | None) -> bool:
    """Whether ``value`` is a valid version ``00`` ``traceparent`` whose sampled flag is clear
    (what :func:`parse_traceparent` accepts, for that version, with an even flags byte): such
    a context is carried on as it came, without reading its ids."""
    if type(value) is bytes:
        return _UNSAMPLED_BYTES.fullmatch(value) is not None
    if type(value) is str:
        return _UNSAMPLED.fullmatch(value) is not None
    return False
