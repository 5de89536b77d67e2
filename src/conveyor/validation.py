"""Checks for Conveyor's own settings; each failure is a ConfigurationError naming the setting."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from conveyor.errors import ConfigurationError
from conveyor.oauth_settings import check_oauth_settings

__all__ = ["check_aware", "check_count", "check_kafka_values", "check_seconds"]


def check_seconds(name: str, value: Any, allow_none: bool = False) -> None:
    """``value`` must be a positive, finite number of seconds (or ``None`` when allowed)."""
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"{name} must be a positive number of seconds, got {value!r}", name
        )


def check_aware(name: str, value: Any) -> datetime:
    """``value`` when it is a datetime with a time zone (a naive one could be any instant)."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ConfigurationError(f"{name} must be a datetime with a time zone, not {value!r}", name)
    return value


def check_count(name: str, value: Any, minimum: int = 1) -> None:
    """``value`` must be an integer of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}", name)


# librdkafka settings that Conveyor reads as numbers itself (before librdkafka checks them).
_WHOLE_NUMBERS = frozenset(
    {
        "message.timeout.ms",
        "delivery.timeout.ms",
        "message.max.bytes",
        "auto.commit.interval.ms",
        "max.poll.interval.ms",
        "transaction.timeout.ms",
        "session.timeout.ms",
    }
)
# Settings that take a Python object, not a value librdkafka parses.
_OBJECTS = ("_cb", "logger")


def check_kafka_values(kafka: Mapping[str, Any], where: str = "kafka") -> None:
    """Each librdkafka setting in ``kafka`` has a value librdkafka can take: a string, a number,
    a bool or a path (a callable for callbacks), and the ones Conveyor reads itself a
    whole number. ``None`` is refused with a hint: leaving a setting out gives its default
    (librdkafka aborts the process on some, ``group.id`` among them). OAUTHBEARER's
    principal name and SASL extensions are checked as librdkafka reads them at the first
    login (see :mod:`conveyor.oauth_settings`).

    Raises:
        ConfigurationError: naming the setting and the type it takes.
    """
    for name, value in kafka.items():
        if name.endswith(_OBJECTS) or callable(value):  # callbacks (on_delivery too), a logger
            if value is None or (name.endswith("_cb") and not callable(value)):
                raise ConfigurationError(
                    f'{where}["{name}"] must be a callable, got {value!r}', name
                )
            continue
        if value is None:
            raise ConfigurationError(
                f'{where}["{name}"] is None: give a string, a number or a bool (or leave the '
                "setting out for its default)",
                name,
            )
        if not isinstance(value, str | int | float | bool | os.PathLike):
            raise ConfigurationError(
                f'{where}["{name}"] must be a string, a number or a bool, got '
                f"{type(value).__name__} {value!r}",
                name,
            )
        if name in _WHOLE_NUMBERS and not _whole_number(value):
            raise ConfigurationError(
                f'{where}["{name}"] must be a whole number of '
                f"{'bytes' if name.endswith('bytes') else 'milliseconds'}, got {value!r}",
                name,
            )
    check_oauth_settings(kafka, where)


def _whole_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, str) and value.strip().isdigit()
