"""One background thread per client that serves librdkafka's callbacks.

Delivery reports, errors, statistics, logs and OAuth refreshes are all served by
``poll()``: the thread blocks inside librdkafka (GIL released) and wakes the moment
an event is queued, so a waiting caller is woken within microseconds of the report.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Poller"]

_log = logging.getLogger("conveyor.driver")

# How long one poll() may block when nothing happens; bounds how long stop() takes.
_POLL_SLICE = 0.1


class Poller:
    """Serves ``client.poll`` on a daemon thread until :meth:`stop`.

    ``on_served`` is called after every poll that served at least one event (the
    producer uses it to wake threads that wait for room in a full queue).
    ``on_crash`` receives an exception raised out of a callback; the thread goes on.
    ``on_idle`` is called after every poll that served nothing (keep it cheap).
    """

    def __init__(
        self,
        client: Any,
        name: str,
        on_served: Callable[[], None] | None = None,
        on_crash: Callable[[BaseException], None] | None = None,
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self._client = client
        self._on_served = on_served
        self._on_crash = on_crash
        self._on_idle = on_idle
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        poll = self._client.poll
        on_served = self._on_served
        on_idle = self._on_idle
        while self._running:
            try:
                served = poll(_POLL_SLICE)
            except Exception as exc:  # a user callback raised: report it, keep serving
                if self._on_crash is not None:
                    self._on_crash(exc)
                else:
                    _log.exception("a librdkafka callback raised")
                continue
            if served:
                if on_served is not None:
                    on_served()
            elif on_idle is not None:
                on_idle()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread after its current poll; safe to call twice or from the thread itself."""
        self._running = False
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
