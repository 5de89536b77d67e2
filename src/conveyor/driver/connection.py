"""``ConnectionWatch``: one client's connection to the cluster, told once, not per retry.

While the brokers are unreachable librdkafka reports every failed reconnect (tens per second
with several clients). The watch turns them into three kinds of news: the connection was
lost (the first error), it is still lost (a reminder every ``reminder`` seconds, with the
count), it is back (the first sign of life after the loss: a fetched message, a commit, a
delivery, or a metadata probe that the client's own thread runs while it is down).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from conveyor.errors import KafkaError

__all__ = ["CONNECTION_ERRORS", "ConnectionNews", "ConnectionWatch"]

CONNECTION_ERRORS = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE"})
"""librdkafka errors that mean "cannot reach the brokers" rather than a failed operation."""

_PROBE_INTERVAL = 5.0


@dataclass(frozen=True)
class ConnectionNews:
    """What changed: ``lost`` (``reminder`` when it is not the first word of this outage) or
    ``restored``; ``down_for`` seconds so far, ``errors`` reported since the loss."""

    client: str
    restored: bool
    reminder: bool
    down_for: float
    errors: int
    error: KafkaError | None


class ConnectionWatch:
    """Tracks one client's connection; ``tell`` hears each piece of news (any thread)."""

    def __init__(
        self, client: str, tell: Callable[[ConnectionNews], None], reminder: float = 30.0
    ) -> None:
        self.client = client
        self._tell = tell
        self.reminder = reminder
        self._lock = threading.Lock()
        self.down_since: float | None = None
        """``time.monotonic()`` when the connection was lost (``None`` while it is up)."""
        self._errors = 0
        self._last_told = 0.0
        self._next_probe = 0.0

    def error(self, failure: KafkaError) -> bool:
        """Hear an error; returns False when it is not about the connection (the caller
        reports it as usual)."""
        if failure.name not in CONNECTION_ERRORS:
            return False
        now = time.monotonic()
        with self._lock:
            self._errors += 1
            if self.down_since is None:
                self.down_since = self._last_told = now
                self._next_probe = now + _PROBE_INTERVAL
                news = ConnectionNews(self.client, False, False, 0.0, self._errors, failure)
            elif now - self._last_told >= self.reminder:
                self._last_told = now
                news = ConnectionNews(
                    self.client, False, True, now - self.down_since, self._errors, failure
                )
            else:
                return True
        self._tell(news)
        return True

    def alive(self) -> None:
        """The cluster answered (cheap to call while the connection is up)."""
        if self.down_since is None:
            return
        with self._lock:
            if self.down_since is None:
                return
            news = ConnectionNews(
                self.client, True, False, time.monotonic() - self.down_since, self._errors, None
            )
            self.down_since = None
            self._errors = 0
        self._tell(news)

    def probe_due(self) -> bool:
        """While down: whether it is time to ask the cluster for metadata (then ``alive()`` if
        it answers). Every few seconds, so that an idle client also notices the return."""
        if self.down_since is None:
            return False
        now = time.monotonic()
        if now < self._next_probe:
            return False
        self._next_probe = now + _PROBE_INTERVAL
        return True
