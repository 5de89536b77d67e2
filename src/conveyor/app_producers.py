"""``AppProducers``: the app's producer and transactional producer, made when first used.

Each has the app's kafka settings and monitor, and the hooks of the app's features (tracing,
latency stamps, the schedules topic), whichever of the producer and the feature comes first.

The transactional one takes its ``transactional.id`` from the process's slot on the host
(:mod:`conveyor.slots`), so that a process restarted in a crashed one's place fences the
transaction that one left open (:meth:`AppProducers.fence_predecessor`, at start).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from conveyor.instrumentation import events as ev
from conveyor.producer import Producer
from conveyor.schedules.wire import app_topic
from conveyor.settings import producer_settings
from conveyor.slots import host_slot, previous_use, record_use

if TYPE_CHECKING:
    from conveyor.instrumentation import Monitor
    from conveyor.settings import AppSettings

__all__ = ["AppProducers", "ProducerHook"]

_log = logging.getLogger("conveyor")
_TRANSACTIONAL = "transactional"  # what a slot records once its process made transactions
_HOOKS = ("tracing", "latency", "schedules")  # the order the features hook a new producer in


class ProducerHook(Protocol):
    """A feature that hooks the app's producers (tracing, latency stamps, the schedules)."""

    def attach(self, producer: Producer) -> None:
        """Hook ``producer``, one of the app's."""


_Hook = TypeVar("_Hook", bound=ProducerHook)


class AppProducers:
    """The producer and the transactional producer of one app (``app.producer``,
    ``app.transactional_producer``), made on first use."""

    def __init__(self, settings: AppSettings, monitor: Monitor, group: str) -> None:
        """``group``: the app's default consumer group, which names its schedules topic."""
        self.settings = settings
        self.monitor = monitor
        self.plain: Producer | None = None
        """The app's producer, once made."""
        self.transactional: Producer | None = None
        """The app's transactional producer, once made."""
        self.lock = threading.RLock()
        """Held to make a producer or a feature of the app (re-entered: a feature that hooks
        producers is made under it and then hooked under it)."""
        self._factory: Callable[..., Producer] = Producer
        self._schedules_topic = app_topic(group)
        self._hooks: dict[str, ProducerHook] = {}

    def producer(self) -> Producer:
        """The app's producer (made now if it was not)."""
        with self.lock:
            if self.plain is None:
                settings = producer_settings(self.settings.kafka)
                settings.setdefault("client.id", f"{self.settings.client_id}-producer")
                self.plain = self._new(settings)
            return self.plain

    def transactional_producer(self) -> Producer:
        """The app's transactional producer (made now if it was not)."""
        with self.lock:
            if self.transactional is None:
                settings = producer_settings(self.settings.kafka)
                settings["transactional.id"] = self.transactional_id()
                settings["client.id"] = f"{self.settings.client_id}-transactional-producer"
                producer = self.transactional = self._new(settings)
                if self.settings.instance_id is None:  # the slot's next holder fences at start
                    producer.transactions.on_first_begin = self._record_transactional
            return self.transactional

    def make_with(self, factory: Callable[..., Producer]) -> None:
        """Make the producers with ``factory(settings, monitor=...)`` from now on; those made
        before are closed at once (what they queued is not sent) and made again at next use."""
        with self.lock:
            for previous in (self.plain, self.transactional):
                if previous is not None:
                    previous.close(0)
            self.plain = self.transactional = None
            self._factory = factory

    def hook(self, name: str, feature: _Hook) -> _Hook:
        """``feature`` (``name``: one of tracing, latency and schedules) attached to the
        producers made so far, and to each made from now on."""
        with self.lock:
            for producer in (self.plain, self.transactional):
                if producer is not None:
                    feature.attach(producer)
            self._hooks[name] = feature
        return feature

    def _new(self, settings: dict[str, Any]) -> Producer:
        """One of the app's producers: its monitor, the app's schedules topic, and the hooks
        of the features made so far."""
        producer = self._factory(settings, monitor=self.monitor)
        producer.schedules_topic = self._schedules_topic  # as Schedules.attach, once they are made
        for name in _HOOKS:
            feature = self._hooks.get(name)
            if feature is not None:
                feature.attach(producer)
        return producer

    def close(self, deadline: float) -> None:
        """Close the producers made, each waiting until ``deadline`` (monotonic), at least 1 s,
        for what it queued."""
        for producer in (self.plain, self.transactional):
            if producer is not None:
                producer.close(max(1.0, deadline - time.monotonic()))

    # -- the transactional producer's slot --------------------------------------------------

    def transactional_id(self) -> str:
        """See ``App.transactional_id``."""
        client_id = self.settings.client_id
        instance = self.settings.instance_id
        if instance is None:
            try:
                instance = host_slot(self._slot_name)
            except OSError as exc:  # no writable temporary folder: unique, not stable
                _log.warning("no slot for a stable transactional.id (%s): using the pid", exc)
                instance = f"{socket.gethostname()}-pid{os.getpid()}"
        return f"{client_id}-conveyor-{instance}"

    @property
    def _slot_name(self) -> str:
        return f"{self.settings.client_id}-transactional"

    def _record_transactional(self) -> None:
        try:
            record_use(self._slot_name, _TRANSACTIONAL)
        except OSError as exc:  # no slot folder: only the fence at a stalled fetch is left
            _log.warning("could not record transactions in this process's slot: %s", exc)

    def fence_predecessor(self) -> None:
        """The process that held this slot before made transactions (and may have crashed in
        one, holding its offsets): initialize this one's transactional producer, with the
        same ``transactional.id``, now, beside the start (Kafka aborts what was left open)."""
        if self.settings.instance_id is not None:
            return
        try:
            if previous_use(self._slot_name) != _TRANSACTIONAL:
                return
        except OSError as exc:  # no writable temporary folder: no slot to read
            _log.warning("could not read this process's slot: %s", exc)
            return

        def fence() -> None:
            try:
                self.transactional_producer().transactions.initialize()
            except Exception as exc:  # reported; a stalled offset fetch fences again
                if ev.ERROR_OCCURRED in self.monitor.subscribed:
                    self.monitor.instrument(
                        ev.ERROR_OCCURRED, type="transaction.fence.error", error=exc
                    )
                else:
                    _log.warning("could not fence the predecessor's transaction: %s", exc)

        threading.Thread(target=fence, name="conveyor-fence", daemon=True).start()
