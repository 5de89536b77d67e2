"""How the explorer shows a message: text, JSON or hex with sizes (:func:`message_view`), and
one line of an export (:func:`export_line`)."""

from __future__ import annotations

import json
from typing import Any

from conveyor.serialization import text_or_base64

__all__ = ["HEX_LIMIT", "KEY_PREVIEW", "PREVIEW", "export_line", "message_view"]

PREVIEW = 160  # characters of a payload shown in a listing
KEY_PREVIEW = 64  # characters of a key shown in a listing (a UUID, an id with a prefix, whole)
HEX_LIMIT = 4096  # bytes of a binary payload shown as hex


# -- how a message is shown ---------------------------------------------------------------------


def _bytes_view(value: bytes | None) -> dict[str, Any]:
    """Bytes as text when they are UTF-8, else as hex; always with their length."""
    if value is None:
        return {"kind": "null", "size": 0, "text": None}
    try:
        return {"kind": "text", "size": len(value), "text": value.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "kind": "binary",
            "size": len(value),
            "text": None,
            "hex": value[:HEX_LIMIT].hex(" "),
            "truncated": len(value) > HEX_LIMIT,
        }


def _payload_view(value: bytes | None) -> dict[str, Any]:
    view = _bytes_view(value)
    if view["kind"] == "text":
        try:
            document = json.loads(view["text"])
        except ValueError:
            pass
        else:
            view["kind"] = "json"
            view["pretty"] = json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False)
    elif view["kind"] == "null":
        view["pretty"] = None
    return view


def _preview(view: dict[str, Any], limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters of a view's text (its hex when binary, cut after a
    whole byte), and whether that cut something off."""
    text = view.get("text")
    if text is not None:
        return text[:limit], len(text) > limit
    whole = view.get("hex") or ""
    cut = whole[: (limit + 1) // 3 * 3 - 1]  # "ff fe 0" would end in half a byte
    return cut, len(whole) > len(cut)


def message_view(raw: Any, full: bool = True) -> dict[str, Any]:
    """A message as plain data for a page or JSON: where it is, when, its key, headers and
    payload (raw and decoded). ``full=False`` (a listing) keeps a short ``preview`` of the
    payload and of the key, each with ``cut`` (whether it is shorter than the value); the
    key keeps its whole ``text`` too, for a tooltip."""
    kind, stamp = raw.timestamp()
    payload = _payload_view(raw.value())
    key = _bytes_view(raw.key())
    if not full:
        preview, cut = _preview(payload, PREVIEW)
        payload = {"kind": payload["kind"], "size": payload["size"], "preview": preview, "cut": cut}
        key["preview"], key["cut"] = _preview(key, KEY_PREVIEW)
    return {
        "topic": raw.topic(),
        "partition": raw.partition(),
        "offset": raw.offset(),
        "timestamp": stamp / 1000 if kind and stamp >= 0 else None,
        "timestamp_type": {1: "create", 2: "log append"}.get(kind, "none"),
        "key": key,
        "headers": [{"name": name, **_bytes_view(value)} for name, value in raw.headers() or ()],
        "payload": payload,
    }


def export_line(raw: Any) -> bytes:
    """One message as a JSON line of the export: text where the bytes are UTF-8, else
    ``{"base64": ...}``; the payload as JSON where it is JSON."""
    value = raw.value()
    payload = text_or_base64(value)
    if isinstance(payload, str):
        try:
            payload = {"json": json.loads(payload)}
        except ValueError:
            payload = {"text": payload}
    kind, stamp = raw.timestamp()
    line = {
        "topic": raw.topic(),
        "partition": raw.partition(),
        "offset": raw.offset(),
        "timestamp": stamp if kind else None,
        "key": text_or_base64(raw.key()),
        "headers": [[name, text_or_base64(v)] for name, v in raw.headers() or ()],
        "payload": payload,
    }
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"
