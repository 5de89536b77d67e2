"""Topic and broker config entries as :class:`~conveyor.admin.Admin` shows and changes them:
the entries (:class:`ConfigValue`), what a change did (:class:`ConfigChange`), and the checks
of a change before it is sent (Kafka's IncrementalAlterConfigs: set, delete, append to and
subtract from a list)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = [
    "APPEND",
    "DELETE",
    "OPERATIONS",
    "SET",
    "SUBTRACT",
    "ConfigChange",
    "ConfigValue",
    "check_changes",
    "check_kind",
    "shown_value",
    "shows",
]

SET, DELETE, APPEND, SUBTRACT = "set", "delete", "append", "subtract"
OPERATIONS = (SET, DELETE, APPEND, SUBTRACT)
"""Kafka's incremental operations on one config entry: set a value, delete the override (back
to the default), append items to a list config, subtract items from one."""


@dataclass(frozen=True)
class ConfigValue:
    """One config entry: its value, whether it is the default, sensitive or read-only, where it
    comes from, and its synonyms (``(name, value)`` pairs, most specific first)."""

    name: str
    value: str | None
    default: bool
    sensitive: bool
    read_only: bool
    source: str
    synonyms: list[tuple[str, str | None]]


@dataclass(frozen=True)
class ConfigChange:
    """One config entry that :meth:`Admin.alter_configs` changed: its value before and after
    (``None`` where Kafka shows none, ``"***"`` for a sensitive one), and where the value in
    force comes from now (``DYNAMIC_BROKER_CONFIG``, ``DEFAULT_CONFIG`` after a reset ...)."""

    name: str
    before: str | None
    after: str | None
    source: str


def check_kind(kind: str) -> None:
    if kind not in ("topic", "broker"):
        raise ConfigurationError(f"config resources are 'topic' or 'broker', got {kind!r}", "kind")


# Where a value set at this resource's own level comes from (what a reset removes).
_OWN_SOURCE = {"topic": "DYNAMIC_TOPIC_CONFIG", "broker": "DYNAMIC_BROKER_CONFIG"}


def _items(value: str | None) -> list[str]:
    """A list config's items (Kafka writes a list as ``a,b``)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _list_value(where: str, argument: str, key: str, value: Any) -> str:
    """What to append or subtract: a string (``"a"`` or ``"a,b"``) or a list of strings."""
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, Sequence)
        or not items
        or not all(isinstance(item, str) and _items(item) for item in items)
    ):
        raise ConfigurationError(
            f"{where}: {argument}[{key!r}] must be a non-empty string or list of strings (the "
            f"list config's items), got {value!r}",
            key,
        )
    return ",".join(part for item in items for part in _items(item))


def check_changes(
    kind: str,
    name: str,
    changes: Any,
    current: Mapping[str, ConfigValue],
    append: Any = None,
    subtract: Any = None,
) -> dict[str, tuple[str, str | None]]:
    """The changes as ``{config: (operation, text or None)}``: ``changes`` sets (``None``
    deletes), ``append`` and ``subtract`` add items to and remove them from list configs; each
    names a config the resource has and Kafka can change while it runs, in one of them only.

    Raises:
        ConfigurationError: naming the argument or the config.
    """
    where = f"alter_configs({kind!r}, {name!r})"
    given = {"changes": changes, "append": append, "subtract": subtract}
    for argument, value in given.items():
        if value is not None and not isinstance(value, Mapping):
            raise ConfigurationError(
                f"{where}: {argument} must be a mapping of config names to values, got {value!r}",
                argument,
            )
    if not any(given.values()):
        raise ConfigurationError(
            f"{where}: changes must be a non-empty mapping of config names to values (None "
            f"resets one), or give append= or subtract= (items of list configs), got {changes!r}",
            "changes",
        )
    checked: dict[str, tuple[str, str | None]] = {}
    for argument, mapping in given.items():
        for key, value in (mapping or {}).items():
            if not isinstance(key, str) or not key:
                raise ConfigurationError(f"{where}: {key!r} is not a config name", argument)
            if key in checked:
                raise ConfigurationError(
                    f"{where}: {key!r} is changed twice (in {checked[key][0]} and {argument}): "
                    "one operation per config a call",
                    key,
                )
            _check_entry(where, kind, name, key, current)
            if argument != "changes":
                checked[key] = (argument, _list_value(where, argument, key, value))
                continue
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, str | int | float)
            ):
                raise ConfigurationError(
                    f"{where}: the value of {key!r} must be a string (or None to reset it), got "
                    f"{value!r}",
                    key,
                )
            checked[key] = (DELETE, None) if value is None else (SET, str(value))
    return checked


def _check_entry(
    where: str, kind: str, name: str, key: str, current: Mapping[str, ConfigValue]
) -> None:
    entry = current.get(key)
    # A broker's per-listener settings (listener.name.<listener>.<config>) are dynamic and
    # never listed by describe.
    if entry is None and not (kind == "broker" and key.startswith("listener.name.")):
        close = difflib.get_close_matches(key, list(current), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigurationError(f"{where}: {kind} {name} has no config {key!r}{hint}", key)
    if entry is not None and entry.read_only:
        raise ConfigurationError(
            f"{where}: {key!r} is read-only: Kafka cannot change it while the broker runs "
            "(set it in the broker's server.properties and restart the broker)",
            key,
        )


def reset(entry: ConfigValue, kind: str) -> bool:
    """Whether ``entry`` shows its override deleted. A broker drops the override from its
    metadata before it applies the value underneath (seen: source ``DEFAULT_CONFIG`` with the
    old value for a moment), so a value back at its default must also be the default's: the
    last synonym (confluent-kafka keys synonyms by name, so of a broker config's synonyms,
    which share its name, only the last, Kafka's default, is left)."""
    if entry.source == _OWN_SOURCE[kind]:
        return False
    if entry.source != "DEFAULT_CONFIG" or not entry.synonyms:
        return True  # a static or cluster-wide value: none to compare with
    return entry.value == entry.synonyms[-1][1]


def shows(entry: ConfigValue, operation: str, value: str | None, kind: str) -> bool:
    """Whether ``entry``, described after a change, shows it done."""
    if entry.sensitive:
        return True  # masked: nothing to compare
    if operation == DELETE:
        return reset(entry, kind)
    if operation == APPEND:
        return set(_items(value)) <= set(_items(entry.value))
    if operation == SUBTRACT:
        return not set(_items(value)) & set(_items(entry.value))
    return entry.value == value


def shown_value(entry: ConfigValue | None) -> str | None:
    if entry is None:
        return None
    return "***" if entry.sensitive else entry.value
