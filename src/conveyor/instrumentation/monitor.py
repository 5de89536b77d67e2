"""The monitor: a small synchronous event bus that every part reports to.

Logging, metrics, tracing and the Web UI are listeners of it. Emitting an event
nobody listens to costs one set lookup, so the hot paths check
``name in monitor.subscribed`` before they build a payload.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from conveyor.instrumentation.events import ERROR_OCCURRED

__all__ = ["ALL_EVENTS", "Event", "Listener", "Monitor"]

_log = logging.getLogger("conveyor.monitor")

ALL_EVENTS = "*"
"""Subscribe to this name to receive every event."""


class Event(Mapping[str, Any]):
    """One emitted event: its ``name`` and a read-only payload (``event["topic"]``)."""

    __slots__ = ("_payload", "name")

    def __init__(self, name: str, payload: dict[str, Any]) -> None:
        self.name = name
        self._payload = payload

    def __getitem__(self, key: str) -> Any:
        return self._payload[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._payload)

    def __len__(self) -> int:
        return len(self._payload)

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {self._payload!r})"


Listener = Callable[[Event], None]


class Monitor:
    """Listeners subscribe to event names; parts call :meth:`instrument` to emit.

    Listeners run synchronously on the emitting thread, so they must be fast and
    thread-safe; one that raises is logged (and reported as ``error.occurred``)
    without disturbing the emitter or the other listeners.

    Example::

        monitor.subscribe("message.acknowledged", lambda event: print(event["offset"]))
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, tuple[Listener, ...]] = {}
        self.subscribed: frozenset[str] = frozenset()
        """Event names with at least one listener (all names while someone listens to ``*``)."""

    def subscribe(self, name: str, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event ``name`` (``"*"`` for all); returns an unsubscribe function."""
        with self._lock:
            self._listeners[name] = (*self._listeners.get(name, ()), listener)
            self._refresh()

        def unsubscribe() -> None:
            with self._lock:
                remaining = tuple(
                    item for item in self._listeners.get(name, ()) if item is not listener
                )
                if remaining:
                    self._listeners[name] = remaining
                else:
                    self._listeners.pop(name, None)
                self._refresh()

        return unsubscribe

    def _refresh(self) -> None:
        if ALL_EVENTS in self._listeners:
            self.subscribed = _Everything()
        else:
            self.subscribed = frozenset(self._listeners)

    def listening(self, name: str) -> bool:
        """Whether emitting ``name`` would reach anyone."""
        return name in self.subscribed

    def instrument(self, name: str, **payload: Any) -> None:
        """Emit event ``name`` with ``payload`` to its listeners (and to ``*`` listeners)."""
        listeners = self._listeners.get(name, ()) + self._listeners.get(ALL_EVENTS, ())
        if not listeners:
            return
        payload.setdefault("time", time.monotonic())
        event = Event(name, payload)
        for listener in listeners:
            try:
                listener(event)
            except Exception as exc:
                _log.exception("monitor listener %r failed on %s", listener, name)
                if name != ERROR_OCCURRED:
                    self.instrument(
                        ERROR_OCCURRED, type="monitor.listener.error", error=exc, event=name
                    )


class _Everything(frozenset[str]):
    """The ``subscribed`` set while a ``*`` listener exists: contains every name."""

    def __contains__(self, item: object) -> bool:
        return True
