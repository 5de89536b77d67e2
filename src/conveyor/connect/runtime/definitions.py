"""A connector's configuration as Kafka Connect describes it: named fields with a type, a
default and documentation, string values in, typed values out, and the errors per field that
``PUT /connector-plugins/{plugin}/config/validate`` reports (Connect's ``ConfigInfos``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = [
    "COMMON_FIELDS",
    "SINK_FIELDS",
    "SOURCE_FIELDS",
    "Field",
    "at_least",
    "config_infos",
    "field_errors",
    "http_url",
    "one_of",
    "parse_config",
    "positive",
]

FieldType = Literal["STRING", "INT", "LONG", "DOUBLE", "BOOLEAN", "LIST", "PASSWORD", "CLASS"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,248}$")


@dataclass(frozen=True)
class Field:
    """One setting of a connector.

    Args:
        name: as users write it (``file``, ``tasks.max``).
        type: Connect's type name; the value arrives as a string and is parsed by it (a
            ``LIST`` is comma-separated, a ``BOOLEAN`` ``true``/``false``).
        documentation: what it is for (shown by validation and the guide).
        default: the value when not given, as a string; ``None`` with ``required``: must be
            given.
        required: whether a value must be given.
        check: an error message for a parsed value that is not acceptable, else ``None``.
        recommended: the values to suggest.
        group: the group Connect shows it under.
        importance: ``HIGH``, ``MEDIUM`` or ``LOW``.
    """

    name: str
    type: FieldType
    documentation: str
    default: str | None = None
    required: bool = False
    check: Callable[[Any], str | None] | None = None
    recommended: tuple[str, ...] = ()
    group: str = "Common"
    importance: Literal["HIGH", "MEDIUM", "LOW"] = "MEDIUM"
    order: int = field(default=0, compare=False)

    def parse(self, raw: Any) -> Any:
        """The typed value of ``raw`` (a string, or already the type); raises ``ValueError``
        with a message for one that is not of the type."""
        if raw is None:
            return None
        text = raw if isinstance(raw, str) else str(raw)
        if self.type in ("INT", "LONG"):
            if isinstance(raw, bool):
                raise ValueError(f"Invalid value {raw} for configuration {self.name}")
            try:
                return int(text.strip())
            except ValueError:
                raise ValueError(
                    f"Invalid value {text} for configuration {self.name}: Not a number of type "
                    f"{self.type}"
                ) from None
        if self.type == "DOUBLE":
            try:
                return float(text.strip())
            except ValueError:
                raise ValueError(
                    f"Invalid value {text} for configuration {self.name}: Not a number of type "
                    "DOUBLE"
                ) from None
        if self.type == "BOOLEAN":
            lowered = text.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(
                    f"Invalid value {text} for configuration {self.name}: Expected value to be "
                    "either true or false"
                )
            return lowered == "true"
        if self.type == "LIST":
            return [item.strip() for item in text.split(",") if item.strip()]
        return text


def at_least(minimum: int) -> Callable[[Any], str | None]:
    """A field's check: the value is ``minimum`` or more."""

    def check(value: Any) -> str | None:
        return None if value >= minimum else f"Value must be at least {minimum}"

    return check


def one_of(*allowed: str) -> Callable[[Any], str | None]:
    """A field's check: the value is one of ``allowed``."""

    def check(value: Any) -> str | None:
        return None if value in allowed else "String must be one of: " + ", ".join(allowed)

    return check


def positive(value: Any) -> str | None:
    """A field's check: the value is above 0."""
    return None if value > 0 else "Value must be positive"


def http_url(value: Any) -> str | None:
    """A field's check: the value is an http:// or https:// URL with a host."""
    try:
        parts = urlsplit(str(value))
        parts.port  # noqa: B018 - raises for a malformed port
    except ValueError:
        return "Value must be an http:// or https:// URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Value must be an http:// or https:// URL"
    return None


def _connector_name(value: Any) -> str | None:
    if not _NAME.match(value):
        return (
            "Connector name must be 1 to 249 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return None


COMMON_FIELDS = (
    Field(
        "name",
        "STRING",
        "Globally unique name to use for this connector.",
        required=True,
        check=_connector_name,
        importance="HIGH",
        order=1,
    ),
    Field(
        "connector.class",
        "STRING",
        "Name or alias of the class for this connector (an entry point of the "
        "conveyor.connectors group, its class name or its import path).",
        required=True,
        importance="HIGH",
        order=2,
    ),
    Field(
        "tasks.max",
        "INT",
        "Maximum number of tasks to use for this connector.",
        default="1",
        check=at_least(1),
        importance="HIGH",
        order=3,
    ),
)
"""What every connector has."""

SINK_FIELDS = (
    Field(
        "topics",
        "LIST",
        "List of topics to consume, separated by commas.",
        default="",
        importance="HIGH",
        order=4,
    ),
    Field(
        "errors.deadletterqueue.topic.name",
        "STRING",
        "The topic records that cannot be delivered go to (empty: nothing is dropped; a "
        "record is retried until it is delivered).",
        default="",
        group="Error Handling",
        order=5,
    ),
    Field(
        "errors.retry.limit",
        "INT",
        "With a dead letter queue: the attempts before an undelivered record goes there.",
        default="3",
        check=at_least(0),
        group="Error Handling",
        order=6,
    ),
)
"""What every sink connector has besides :data:`COMMON_FIELDS`."""

SOURCE_FIELDS = (
    Field(
        "exactly.once.support",
        "STRING",
        "requested (or required): the records and their source offsets are written in one "
        "Kafka transaction (KIP-618); none: at least once.",
        default="requested",
        recommended=("requested", "required", "none"),
        check=one_of("requested", "required", "none"),
        order=4,
    ),
    Field(
        "topic.creation.default.partitions",
        "INT",
        "Partitions of a topic the connector writes to that does not exist yet (it is made).",
        default="1",
        check=at_least(1),
        order=6,
    ),
    Field(
        "topic.creation.default.replication.factor",
        "INT",
        "Replicas of a topic made so (-1: the cluster's default).",
        default="-1",
        order=7,
    ),
    Field(
        "offsets.storage.topic",
        "STRING",
        "A topic of the connector's own for its source offsets (empty: the workers').",
        default="",
        order=5,
    ),
)
"""What every source connector has besides :data:`COMMON_FIELDS`."""


def parse_config(fields: Iterable[Field], config: Mapping[str, Any]) -> dict[str, Any]:
    """The typed value of every field (its default when not given); settings that are no
    field are kept as given. Raises ``ValueError`` for the first value that does not parse
    (:func:`field_errors` finds them all)."""
    parsed: dict[str, Any] = dict(config)
    for one in fields:
        raw = config.get(one.name, one.default)
        parsed[one.name] = one.parse(raw)
    return parsed


def field_errors(
    fields: Iterable[Field],
    config: Mapping[str, Any],
    extra: Callable[[dict[str, Any]], Mapping[str, list[str]]] | None = None,
) -> dict[str, list[str]]:
    """Every field's errors (``{}``: none): missing required values, values that do not
    parse or do not pass the field's check, then ``extra``'s checks across fields (given the
    parsed values, only when each parsed)."""
    errors: dict[str, list[str]] = {}
    parsed: dict[str, Any] = dict(config)
    for one in fields:
        raw = config.get(one.name, one.default)
        if raw is None or (one.required and isinstance(raw, str) and not raw.strip()):
            if one.required:
                errors.setdefault(one.name, []).append(
                    f'Missing required configuration "{one.name}" which has no default value.'
                )
            continue
        try:
            value = one.parse(raw)
        except ValueError as error:
            errors.setdefault(one.name, []).append(str(error))
            continue
        parsed[one.name] = value
        if one.check is not None and (message := one.check(value)) is not None:
            errors.setdefault(one.name, []).append(
                f"Invalid value {raw} for configuration {one.name}: {message}"
            )
    if not errors and extra is not None:
        for name, messages in extra(parsed).items():
            errors.setdefault(name, []).extend(messages)
    return errors


def config_infos(
    plugin: str, fields: Iterable[Field], config: Mapping[str, Any], errors: Mapping[str, list[str]]
) -> dict[str, Any]:
    """Kafka Connect's ``ConfigInfos``: each field's definition and value with its errors."""
    fields = list(fields)
    groups: list[str] = []
    configs: list[dict[str, Any]] = []
    for order, one in enumerate(fields, start=1):
        if one.group not in groups:
            groups.append(one.group)
        value = config.get(one.name, one.default)
        shown = "[hidden]" if one.type == "PASSWORD" and value else value
        configs.append(
            {
                "definition": {
                    "name": one.name,
                    "type": one.type,
                    "required": one.required,
                    "default_value": one.default,
                    "importance": one.importance,
                    "documentation": one.documentation,
                    "group": one.group,
                    "width": "NONE",
                    "display_name": one.name,
                    "dependents": [],
                    "order": one.order or order,
                },
                "value": {
                    "name": one.name,
                    "value": shown,
                    "recommended_values": list(one.recommended),
                    "errors": list(errors.get(one.name, ())),
                    "visible": True,
                },
            }
        )
    known = {one.name for one in fields}
    for name, messages in errors.items():  # errors of settings that are no field
        if name not in known:
            configs.append(
                {
                    "definition": None,
                    "value": {
                        "name": name,
                        "value": config.get(name),
                        "recommended_values": [],
                        "errors": list(messages),
                        "visible": True,
                    },
                }
            )
    return {
        "name": plugin,
        "error_count": sum(len(messages) for messages in errors.values()),
        "groups": groups,
        "configs": configs,
    }
