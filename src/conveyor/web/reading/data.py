"""What the UI reads: a thread tailing the states, metrics and errors topics (no consumer
group, nothing committed) and keeping their newest values in memory."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.admin import Admin
from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConveyorError, KafkaError
from conveyor.iterator.scan import reader_settings
from conveyor.serialization import json_loads
from conveyor.settings import producer_settings
from conveyor.web.aggregation.aggregator import AGGREGATOR_KEY
from conveyor.web.topics import WebTopics

__all__ = ["WebData"]

_log = logging.getLogger("conveyor.web")

_RETRY_MISSING = 5.0


class WebData:
    """The newest states, series and errors, as the web UI's topics hold them.

    Thread-safe readers return copies. The tail starts on the first call of :meth:`start`
    (so that an ASGI app mounted in another app, whose lifespan never runs, starts it at its
    first request).
    """

    def __init__(
        self, kafka: Mapping[str, Any], topics: WebTopics, errors_kept: int = 5000
    ) -> None:
        self.kafka = dict(kafka)
        self.topics = topics
        self.errors_kept = errors_kept
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._states: dict[str, dict[str, Any]] = {}
        self._heartbeat: dict[str, Any] | None = None
        self._series: dict[str, dict[str, Any]] = {}
        self._errors: deque[dict[str, Any]] = deque(maxlen=errors_kept)
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.missing_topics: list[str] = []
        self.undecodable = 0

    # -- the tail -----------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="conveyor-web-data", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(5)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the topics were read up to where they ended at start."""
        self.start()
        return self._ready.wait(timeout)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                positions, ends = self._positions()
            except ConveyorError as exc:
                _log.warning("the web UI cannot read its topics yet: %s", exc)
                positions, ends = [], {}
            if not positions or self.missing_topics:
                self._ready.set()  # nothing to wait for: the pages say what is missing
                self._stopped.wait(_RETRY_MISSING)
                continue
            self._tail(positions, ends)
            return

    def _positions(self) -> tuple[list[tuple[str, int, int]], dict[tuple[str, int], int]]:
        positions: list[tuple[str, int, int]] = []
        ends: dict[tuple[str, int], int] = {}
        with Admin(producer_settings(self.kafka), timeout=10) as admin:
            existing = set(admin.list_topics())
            wanted = (self.topics.states, self.topics.metrics, self.topics.errors)
            self.missing_topics = [name for name in wanted if name not in existing]
            if self.missing_topics:
                return [], {}
            for topic in wanted:
                for partition in admin.topic_info(topic).partitions:
                    low, high = admin.read_watermark_offsets(topic, partition.partition)
                    start = (
                        max(low, high - self.errors_kept) if topic == self.topics.errors else low
                    )
                    positions.append((topic, partition.partition, start))
                    if high > start:
                        ends[(topic, partition.partition)] = high
        return positions, ends

    def _tail(
        self, positions: list[tuple[str, int, int]], ends: dict[tuple[str, int], int]
    ) -> None:
        client = ConsumerClient(
            reader_settings(self.kafka, "conveyor-web-reader"), on_fetch_error=self._fetch_error
        )
        client.assign(positions)
        waiting = dict(ends)
        if not waiting:
            self._ready.set()
        try:
            while not self._stopped.is_set():
                batch = client.poll_batch(0.5, 1000)
                if not batch and waiting:
                    waiting.clear()  # nothing more arrives: what compaction removed is not coming
                    self._ready.set()
                for raw in batch:
                    if raw.error() is not None:
                        client.fetch_error(raw)
                        continue
                    self._take(raw)
                    place = (raw.topic(), raw.partition())
                    if place in waiting and raw.offset() >= waiting[place] - 1:
                        del waiting[place]
                        if not waiting:
                            self._ready.set()
        finally:
            client.close()

    def _take(self, raw: Any) -> None:
        topic, key, value = raw.topic(), raw.key(), raw.value()
        name = key.decode("utf-8", "replace") if key else ""
        try:
            document = json_loads(value) if value is not None else None
        except ValueError:
            self.undecodable += 1
            return
        with self._lock:
            if topic == self.topics.states:
                if name == AGGREGATOR_KEY:
                    self._heartbeat = document
                elif document is None:
                    self._states.pop(name, None)
                elif isinstance(document, dict):
                    self._states[name] = document
            elif topic == self.topics.metrics:
                if isinstance(document, dict):
                    self._series[name] = document
            elif topic == self.topics.errors and isinstance(document, dict):
                document["id"] = f"{raw.partition()}-{raw.offset()}"
                self._errors.append(document)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[WebData], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds, checked after each message read (the
        aggregator's heartbeat arrives every interval, so time-based states are seen too)."""
        self.start()
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                self._changed.release()
                try:
                    if predicate(self):
                        return True
                finally:
                    self._changed.acquire()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 1.0))

    def _fetch_error(self, error: KafkaError) -> None:
        _log.warning("the web UI could not read: %s", error)

    # -- reading --------------------------------------------------------------------------------

    def states(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._states)

    def heartbeat(self) -> dict[str, Any] | None:
        with self._lock:
            return dict(self._heartbeat) if self._heartbeat is not None else None

    def series(self, resolution: str) -> dict[str, Any] | None:
        with self._lock:
            return self._series.get(resolution)

    def errors(self) -> list[dict[str, Any]]:
        """Newest first."""
        with self._lock:
            return list(reversed(self._errors))

    def find_error(self, error_id: str) -> dict[str, Any] | None:
        with self._lock:
            return next((e for e in self._errors if e.get("id") == error_id), None)

    @property
    def now(self) -> float:
        return time.time()
