"""``JsonFormatter``: one JSON object a line, for log collectors.

Each line has ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, ``process`` (the
pid) and ``thread``; the fields a Conveyor line is about (``group``, ``topic``,
``partition``, ``listener``, ``client``, ``event`` ...) when it has them; and ``exception``
with the traceback when one was logged. Use it in your own logging set-up too::

    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logging.getLogger().addHandler(handler)
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from typing import Any

__all__ = ["FIELDS", "JsonFormatter"]

FIELDS = "conveyor"
"""The attribute of a log record (set with ``extra={"conveyor": {...}}``) whose fields a
line carries."""


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
            "thread": record.threadName,
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            for name, value in fields.items():
                line.setdefault(name, value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        try:
            return json.dumps(line, default=str, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):  # keys that are not text, NaN: a line all the same
            return json.dumps(_plain(line), ensure_ascii=False)


def _plain(value: Any) -> Any:
    """``value`` with every key made text and every number JSON cannot hold made text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
