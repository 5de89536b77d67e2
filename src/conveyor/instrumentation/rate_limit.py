"""``RateLimitedLog``: a warning that repeats per message is logged once per interval, counted.

A poison message, a flood of malformed requests, a broker that keeps refusing: the first
occurrence is logged at once; the next ones within ``interval`` seconds are only counted, and
the first line after the interval says how many were held back.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """Logs through ``logger`` at most once per ``interval`` seconds per key."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, level: int, key: str, message: str, *args: Any) -> bool:
        """Log ``message % args`` unless ``key`` was logged less than ``interval`` ago (then
        count it). Returns whether a line was written."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._held[key] = self._held.get(key, 0) + 1
                return False
            self._last[key] = now
            held = self._held.pop(key, 0)
        if held:
            message = f"{message} ({held} more like it in the last {self.interval:g} s)"
        self.logger.log(level, message, *args)
        return True

    def warning(self, key: str, message: str, *args: Any) -> bool:
        return self.log(logging.WARNING, key, message, *args)

    def held(self, key: str) -> int:
        """Occurrences of ``key`` counted but not logged yet."""
        with self._lock:
            return self._held.get(key, 0)
