"""Checks for Conveyor's own settings; each failure is a ConfigurationError naming the setting."""

from __future__ import annotations

import math
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = ["check_count", "check_seconds"]


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


def check_count(name: str, value: Any, minimum: int = 1) -> None:
    """``value`` must be an integer of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}", name)
