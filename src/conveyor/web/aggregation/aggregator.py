"""The aggregator: consumer group ``conveyor_web`` reading the reports topic, folding each
report (:class:`~conveyor.web.aggregation.Aggregate`) and publishing the states and metric
series to their compacted topics, then committing.

It runs in app processes (``app.web.enable()``) and in ``conveyor web``; the group gives the
reports partition to one of them. Whoever gets it restores the fold from the compacted topics
first, so a restart or a move to another process loses no history.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.admin import Admin
from conveyor.driver.consumers import ConsumerClient, Partition
from conveyor.errors import ConveyorError, KafkaError
from conveyor.producer import Producer
from conveyor.serialization import json_dumps, json_loads
from conveyor.settings import producer_settings
from conveyor.web.aggregation.fold import RESOLUTIONS, Aggregate
from conveyor.web.reports import MalformedReport, parse_report
from conveyor.web.topics import LABEL, WebTopics

__all__ = ["AGGREGATOR_KEY", "GROUP", "Aggregator"]

_log = logging.getLogger("conveyor.web")

GROUP = WebTopics.group
"""The aggregators' consumer group (unless the app's :class:`WebTopics` names another)."""
AGGREGATOR_KEY = "__aggregator__"
"""The key, on the states topic, of the aggregator's own heartbeat."""


class Aggregator:
    """Folds reports on its own thread; :meth:`stop` publishes what it holds and commits."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        producer: Producer | Callable[[], Producer],
        topics: WebTopics,
        *,
        flush_interval: float = 5.0,
        forget_after: float = 3600.0,
        client_id: str = "conveyor",
    ) -> None:
        self.kafka = dict(kafka)
        self.client_id = client_id
        self._producer = producer  # or what makes it, at the first flush: an app's is made
        self.topics = topics  # on first use, and building an app must not connect to Kafka
        self.flush_interval = flush_interval
        self.aggregate = Aggregate(forget_after=forget_after)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._positions: dict[Partition, int] = {}
        self._owned: set[Partition] = set()
        self._client: ConsumerClient | None = None
        self._flushed_at = -math.inf  # never yet: the first look flushes
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self.error: BaseException | None = None

    @property
    def producer(self) -> Producer:
        """The producer the folded states go out with."""
        if not isinstance(self._producer, Producer):
            self._producer = self._producer()
        return self._producer

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name="conveyor-web-aggregator", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        settings = {
            **{
                k: v
                for k, v in self.kafka.items()
                if not k.startswith(("group.", "transactional."))
            },
            "group.id": self.topics.group,
            "client.id": f"{self.client_id}-web-aggregator",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # a crashed owner stalls the UI until the broker gives its partition away
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1_000,
        }
        try:
            client = ConsumerClient(settings, on_fetch_error=self._fetch_error)
        except ConveyorError as exc:
            self.error = exc
            _log.error("the web aggregator could not start: %s", exc)
            return
        self._client = client
        client.subscribe([self.topics.reports], self._assigned, self._revoked, self._lost)
        try:
            while not self._stopped.is_set():
                batch = client.poll_batch(0.5, 500)
                received_at = time.time()
                for raw in batch:
                    if raw.error() is not None:
                        client.fetch_error(raw)
                        continue
                    self._fold(raw, received_at)
                if time.monotonic() - self._flushed_at >= self.flush_interval:
                    self._flush(client)
            self._flush(client)
        except Exception as exc:  # a crash here must not take the app down; it is shown on Status
            self.error = exc
            _log.exception("the web aggregator stopped")
        finally:
            client.close()

    def _fold(self, raw: Any, received_at: float) -> None:
        topic, partition, offset = raw.topic(), raw.partition(), raw.offset()
        with self._lock:
            self._positions[(topic, partition)] = offset + 1
            try:
                report = parse_report(raw.value())
                self.aggregate.fold(report, received_at)
            except (MalformedReport, ArithmeticError, LookupError, TypeError, ValueError) as exc:
                # a report the checks let through can still not fold: the same verdict
                self.aggregate.malformed += 1
                _log.warning(
                    "skipped a malformed report at %s/%s@%s: %s", topic, partition, offset, exc
                )
                return

    def _flush(self, client: ConsumerClient) -> None:
        """Publish changed states, the series and the heartbeat; then commit what they hold.
        Only the owner of the reports partition publishes (the others hold nothing)."""
        if not self._owned:
            self._flushed_at = time.monotonic()
            return
        now = time.time()
        with self._lock:
            self.aggregate.forget(now)
            changes = self.aggregate.take_changes()
            documents = [self.aggregate.series_document(r.name) for r in RESOLUTIONS]
            positions = dict(self._positions)
            heartbeat = {
                "aggregated_at": now,
                "owner": self._owner,
                "folded": self.aggregate.folded,
                "malformed": self.aggregate.malformed,
                "processes": len(self.aggregate.states),
            }
        messages: list[dict[str, Any]] = [
            {
                "topic": self.topics.states,
                "key": pid,
                "payload": json_dumps(state) if state is not None else None,
                "label": LABEL,
            }
            for pid, state in changes.items()
        ]
        messages += [
            {
                "topic": self.topics.metrics,
                "key": doc["resolution"],
                "payload": json_dumps(doc),
                "label": LABEL,
            }
            for doc in documents
        ]
        messages.append(
            {
                "topic": self.topics.states,
                "key": AGGREGATOR_KEY,
                "payload": json_dumps(heartbeat),
                "label": LABEL,
            }
        )
        self.producer.produce_many_sync(messages, timeout=30)
        if positions:
            client.commit([(t, p, o) for (t, p), o in positions.items()])
        self._flushed_at = time.monotonic()

    # -- rebalancing ----------------------------------------------------------------------------

    def _assigned(self, partitions: list[Partition]) -> None:
        if partitions:
            self._owned.update(partitions)
            self.restore()

    def _revoked(self, partitions: list[Partition]) -> None:
        """Publish and commit what was folded, then let the partitions go (eager rebalance:
        committing is still allowed here)."""
        if self._client is not None and self._owned:
            try:
                self._flush(self._client)
            except ConveyorError as exc:
                _log.warning("the web aggregator could not publish before a rebalance: %s", exc)
        self._lost(partitions)

    def _lost(self, partitions: list[Partition]) -> None:
        with self._lock:
            for partition in partitions:
                self._positions.pop(partition, None)
                self._owned.discard(partition)

    def restore(self) -> None:
        """Load the published states and series (the fold so far) from the compacted topics."""
        states = read_compacted(self.kafka, self.topics.states)
        series = read_compacted(self.kafka, self.topics.metrics)
        with self._lock:
            fresh = Aggregate(forget_after=self.aggregate.forget_after)
            for key, value in states.items():
                if key != AGGREGATOR_KEY:
                    fresh.load_state(key, value)
            for value in series.values():
                if value is not None:
                    fresh.load_series(value)
            fresh.folded, fresh.malformed = self.aggregate.folded, self.aggregate.malformed
            self.aggregate = fresh

    def _fetch_error(self, error: KafkaError) -> None:
        _log.warning("the web aggregator could not fetch: %s", error)


def read_compacted(kafka: Mapping[str, Any], topic: str) -> dict[str, Any]:
    """The newest JSON value of every key of a compacted topic (``None`` for a tombstone); an
    undecodable value is logged and left out."""
    values: dict[str, Any] = {}
    with Admin(producer_settings(kafka)) as admin:
        if topic not in admin.list_topics():
            return values
        for partition in admin.topic_info(topic).partitions:
            low, high = admin.read_watermark_offsets(topic, partition.partition)
            if high <= low:
                continue
            for message in admin.read_topic(topic, partition.partition, high - low, low):
                key = message.raw_key.decode("utf-8", "replace") if message.raw_key else ""
                raw = message.raw_payload
                try:
                    values[key] = json_loads(raw) if raw is not None else None
                except ValueError:
                    _log.warning(
                        "skipped an undecodable value of %s at offset %s", topic, message.offset
                    )
    return values
