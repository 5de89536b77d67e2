"""A JSON-like value as block-style YAML (the AsyncAPI document, without a YAML library).

Mappings and sequences are written in block style; strings are quoted (JSON's escapes, which
YAML's double-quoted style shares) unless they are plain words that YAML reads back as the
same string; empty containers are ``{}`` / ``[]``."""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["to_yaml"]

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/ ]*$")
_CONTROLS = re.compile("[\u007f-\u009f\u2028\u2029]")  # readers refuse or change these raw
_RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:  # YAML 1.1 floats need a dot
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED and not text.endswith(" "):
        return text
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


def _key(key: Any) -> str:
    return _scalar(str(key))


def _lines(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{_key(key)}:")
                lines.extend(_lines(item, indent + 1))
            else:
                lines.append(f"{pad}{_key(key)}: {_inline(item)}")
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            if isinstance(item, dict | list) and item:
                nested = _lines(item, indent + 1)
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines.extend(nested[1:])
            else:
                lines.append(f"{pad}- {_inline(item)}")
        return lines
    return [pad + _scalar(value)]


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def to_yaml(value: Any) -> str:
    """``value`` (dicts, lists, str, numbers, bools, None) as a YAML document."""
    return "\n".join(_lines(value, 0)) + "\n"
