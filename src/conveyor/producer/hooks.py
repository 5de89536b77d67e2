"""``SendHookSwitch``: one send hook, installed on a set of producers while it is switched on
(what ``app.tracing`` and ``app.latency`` do with the app's producers)."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.producer.producer import Producer, SendHook

__all__ = ["SendHookSwitch"]


class SendHookSwitch:
    """Installs ``hook`` on every attached producer while on; producers are held weakly."""

    def __init__(self, hook: SendHook) -> None:
        self._hook = hook
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
        self._on = False
        self._lock = threading.Lock()

    def attach(self, producer: Producer) -> None:
        """Hook ``producer`` now if the switch is on, and whenever it is switched on later."""
        with self._lock:
            self._producers.add(producer)
            if self._on:
                producer.add_send_hook(self._hook)

    def switch(self, on: bool) -> None:
        with self._lock:
            self._on = on
            for producer in list(self._producers):
                if on:
                    producer.add_send_hook(self._hook)
                else:
                    producer.remove_send_hook(self._hook)
