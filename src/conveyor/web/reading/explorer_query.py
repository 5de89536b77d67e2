"""What a request asks the explorer: where to start reading (:class:`Start`, the iterator's
bounded reads' own, from ``iterator.scan``) and which messages to keep (:class:`Filters`: key,
header, payload text or a JSON path's value)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.errors import ConfigurationError
from conveyor.iterator.scan import Start, parse_time

__all__ = ["Filters", "Start", "parse_json_path", "parse_time"]

_JSON_PATH = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]|\.(\d+)")


@dataclass(frozen=True)
class Filters:
    """What a message must match to be shown or exported (all given ones): ``key`` is a
    substring of the key, ``header`` a header name (with ``header_value``: a substring of
    its value), ``contains`` a substring of the payload, ``json_path`` a path into the JSON
    payload (``$.order.items[0].sku`` or ``order.items.0.sku``) that must exist (with
    ``json_value``: equal it, compared as text, or as JSON for numbers, booleans and null).
    """

    key: str | None = None
    header: str | None = None
    header_value: str | None = None
    contains: str | None = None
    json_path: str | None = None
    json_value: str | None = None
    _path: tuple[str | int, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def parse(cls, values: Mapping[str, str | None]) -> Filters:
        """From a form's fields; empty ones are left out.

        Raises:
            ConfigurationError: a malformed JSON path, or a value without what it qualifies.
        """
        given = {
            name: values.get(name) or None
            for name in ("key", "header", "header_value", "contains", "json_path", "json_value")
        }
        if given["header_value"] is not None and given["header"] is None:
            raise ConfigurationError("header_value needs a header name", "header_value")
        if given["json_value"] is not None and given["json_path"] is None:
            raise ConfigurationError("json_value needs a json_path", "json_value")
        path = parse_json_path(given["json_path"]) if given["json_path"] else ()
        return cls(**given, _path=path)

    @property
    def active(self) -> bool:
        return any(
            value is not None for value in (self.key, self.header, self.contains, self.json_path)
        )

    def as_query(self) -> dict[str, str]:
        """The filters as form fields (for links and the export's URL)."""
        return {
            name: value
            for name, value in (
                ("key", self.key),
                ("header", self.header),
                ("header_value", self.header_value),
                ("contains", self.contains),
                ("json_path", self.json_path),
                ("json_value", self.json_value),
            )
            if value is not None
        }

    def matches(self, raw: Any) -> bool:
        """Whether librdkafka's message ``raw`` matches every filter."""
        if self.key is not None:
            key = raw.key()
            if key is None or self.key.encode() not in key:
                return False
        if self.header is not None:
            wanted = self.header_value.encode() if self.header_value is not None else None
            if not any(
                name == self.header and (wanted is None or (value is not None and wanted in value))
                for name, value in raw.headers() or ()
            ):
                return False
        value = raw.value()
        if self.contains is not None and (value is None or self.contains.encode() not in value):
            return False
        if self._path:
            try:
                found = _walk(json.loads(value), self._path)
            except (ValueError, TypeError, LookupError):
                return False
            if self.json_value is not None and not _equal(found, self.json_value):
                return False
        return True


def parse_json_path(text: str) -> tuple[str | int, ...]:
    """``$.a.b[0]`` / ``a.b.0`` / ``$["odd key"]`` as (a, b, 0).

    Raises:
        ConfigurationError: not a path this understands.
    """
    rest = text.strip()
    rest = rest[1:] if rest.startswith("$") else rest
    steps: list[str | int] = []
    position = 0
    while position < len(rest):
        match = _JSON_PATH.match(rest, position)
        if match is None or match.end() == position:
            raise ConfigurationError(
                f"json_path {text!r} is not a path like $.order.items[0].sku", "json_path"
            )
        name, index, quoted, dotted_index = match.groups()
        if name is not None:
            steps.append(name)
        elif quoted is not None:
            steps.append(quoted)
        else:
            steps.append(int(index if index is not None else dotted_index))
        position = match.end()
    if not steps:
        raise ConfigurationError(f"json_path {text!r} names nothing", "json_path")
    return tuple(steps)


def _walk(document: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(document, list):
                raise LookupError(step)
            document = document[step]
        else:
            if not isinstance(document, dict):
                raise LookupError(step)
            document = document[step]
    return document


def _equal(found: Any, wanted: str) -> bool:
    if isinstance(found, str):
        return found == wanted
    try:
        return bool(json.loads(wanted) == found) and type(json.loads(wanted)) is type(found)
    except ValueError:
        return False
