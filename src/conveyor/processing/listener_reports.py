"""``Reporter``: what a listener reports: its commits (and those the group refused), its
rebalances, and what went wrong (librdkafka's client and fetch errors, a poll past
``max.poll.interval.ms`` naming the batch that held it, committed offsets that do not come,
with the fence of a crashed predecessor's transaction), librdkafka's statistics; and the
librdkafka settings of a listener's consumer (:func:`consumer_config`)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.errors import KafkaError
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog

if TYPE_CHECKING:
    from conveyor.driver.consumers import Partition
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.partition_core import PartitionCore
    from conveyor.routing.topic import Topic
    from conveyor.settings import AppSettings

__all__ = ["Reporter", "consumer_config"]

_log = logging.getLogger("conveyor.processing")
_refusals = RateLimitedLog(_log)  # a group that keeps refusing: one line per interval


class Reporter:
    """A listener's reports (see the module): events on the app's monitor, else log lines.

    It reads the listener's executors (to name the batch that held a poll) and whether the
    listener stops (no fence then); both are the listener's, handed in."""

    def __init__(
        self,
        name: str,
        group_id: str,
        context: ProcessingContext,
        executors: Mapping[Partition, PartitionCore],
        stopping: threading.Event,
    ) -> None:
        self.name = name
        self.group_id = group_id
        self.context = context
        self._monitor = context.monitor
        self._executors = executors
        self._stopping = stopping

    def committed(self, offsets: list[tuple[str, int, int]], sync: bool, started: float) -> None:
        """A commit was done (``started``: its ``perf_counter()``)."""
        monitor = self._monitor
        if ev.OFFSETS_COMMITTED in monitor.subscribed:
            monitor.instrument(
                ev.OFFSETS_COMMITTED,
                listener=self.name,
                group=self.group_id,
                offsets=offsets,
                sync=sync,
                duration=time.perf_counter() - started,
                committed_at=time.time(),
            )

    def commit_refused(
        self, offsets: list[tuple[str, int, int]], error: KafkaError, sync: bool
    ) -> None:
        """The group refused a commit (on the listener's thread): reported, and logged."""
        monitor = self._monitor
        if ev.OFFSETS_COMMIT_REFUSED in monitor.subscribed:
            monitor.instrument(
                ev.OFFSETS_COMMIT_REFUSED,
                listener=self.name,
                group=self.group_id,
                offsets=offsets,
                sync=sync,
                error=error,
            )
        _refusals.warning(
            f"{self.name} {error.name}",
            "%s: %s. Not committed: the next commit sends it again while the partitions stay "
            "assigned here, else their next owner reads from the last committed offset (some "
            "messages again)",
            self.name,
            error,
        )

    def partitions_assigned(self, partitions: list[Partition]) -> None:
        """The group assigned ``partitions`` to this listener (started at their offsets)."""
        monitor = self._monitor
        if ev.REBALANCE_PARTITIONS_ASSIGNED in monitor.subscribed:
            monitor.instrument(
                ev.REBALANCE_PARTITIONS_ASSIGNED,
                listener=self.name,
                group=self.group_id,
                partitions=partitions,
            )

    def partitions_revoked(self, partitions: list[Partition]) -> None:
        """``partitions`` left this listener (revoked or lost)."""
        monitor = self._monitor
        if ev.REBALANCE_PARTITIONS_REVOKED in monitor.subscribed:
            monitor.instrument(
                ev.REBALANCE_PARTITIONS_REVOKED,
                listener=self.name,
                group=self.group_id,
                partitions=partitions,
            )

    def error(self, error: KafkaError) -> None:
        """librdkafka's client error, or a listener command that failed."""
        monitor = self._monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="connection.listener.error", listener=self.name, error=error
            )

    def fetch_error(self, error: KafkaError) -> None:
        """A fetch failed for a topic-partition (or librdkafka left the group for a late poll)."""
        if error.name == "_MAX_POLL_EXCEEDED":
            self._poll_interval_exceeded(error)
            return
        monitor = self._monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="consumer.fetch.error",
                listener=self.name,
                error=error,
                topic=getattr(error, "topic", None),
                partition=getattr(error, "partition", None),
            )
        else:
            _log.error("%s: %s", self.name, error)

    def _poll_interval_exceeded(self, error: KafkaError) -> None:
        """librdkafka left the group because this client did not poll within
        max.poll.interval.ms: not a fetch error of some topic, but (mostly) a batch that held
        the listener's thread; say which, and for how long."""
        now = time.time()
        longest: tuple[float, PartitionCore] | None = None
        for executor in list(self._executors.values()):
            for _, batch in executor.running_batches():
                ran = now - batch.started_at
                if longest is None or ran > longest[0]:
                    longest = (ran, executor)
        where = (
            f"; {longest[1].route.name} {longest[1].topic}/{longest[1].partition} had run a "
            f"batch for {longest[0]:.1f} s"
            if longest is not None
            else ""
        )
        failure = KafkaError(
            f"{self.name}: max.poll.interval.ms passed without a poll{where}: the member left "
            "the group and rejoins (its partitions may be read again)",
            code=error.code,
            name=error.name,
        )
        monitor = self._monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="consumer.poll_interval.exceeded",
                listener=self.name,
                error=failure,
                topic=longest[1].topic if longest else None,
                partition=longest[1].partition if longest else None,
            )
        else:
            _log.error("%s", failure)

    def offsets_error(self, error: KafkaError) -> None:
        """Asking for the committed offsets of assigned partitions failed (asked again)."""
        monitor = self._monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="consumer.offsets.error", listener=self.name, error=error
            )
        else:
            _log.warning("%s: %s (asking again)", self.name, error)

    def fence(self) -> None:
        """The committed offsets do not come: an open transaction may hold them. If it is the
        one a crashed predecessor in this process's slot left, initializing the app's
        transactional producer (the slot's ``transactional.id``) aborts it now, instead of
        after the broker's ``transaction.timeout.ms``. On a thread of its own: the listener
        goes on asking meanwhile (and an app that never made transactions loses nothing but
        a producer when a slow answer was all it was). Not while the listener stops: the app
        would not close a producer made after its shutdown began."""
        if self._stopping.is_set():
            return
        threading.Thread(
            target=self._fence_now, name=f"conveyor-fence-{self.name}", daemon=True
        ).start()

    def _fence_now(self) -> None:
        try:
            self.context.transactional_producer().transactions.initialize()
        except Exception as exc:  # reported: the offsets are asked for again all the same
            monitor = self._monitor
            if ev.ERROR_OCCURRED in monitor.subscribed:
                monitor.instrument(
                    ev.ERROR_OCCURRED,
                    type="transaction.fence.error",
                    listener=self.name,
                    error=exc,
                )
            else:
                _log.warning("%s: could not fence a predecessor's transaction: %s", self.name, exc)

    def statistics(self, raw: str) -> None:
        """librdkafka's statistics (``statistics.interval.ms``), as it emits them (JSON)."""
        monitor = self._monitor
        if ev.STATISTICS_EMITTED in monitor.subscribed:
            monitor.instrument(
                ev.STATISTICS_EMITTED, listener=self.name, statistics=json.loads(raw)
            )


def consumer_config(
    settings: AppSettings, routes: list[Topic], group_id: str, client_id: str
) -> dict[str, Any]:
    """The librdkafka settings of the consumer of a listener of ``routes`` (which share their
    own settings, see the runner): the app's, the routes', and what the listener needs."""
    config: dict[str, Any] = {
        # When librdkafka's queue is full it waits fetch.queue.backoff.ms (1 s by default)
        # before fetching that partition again; a listener that hands messages to workers
        # fills the queue in bursts, and the full second showed as a 4x throughput loss.
        "fetch.queue.backoff.ms": 10,
        **settings.kafka,
        **routes[0].kafka,  # the listener's routes share their own settings (see the runner)
        "group.id": group_id,
        "client.id": client_id,
        # Offsets are committed by the listener: what workers marked, every interval, at
        # revocation and at shutdown; librdkafka never commits on its own.
        "enable.auto.commit": False,
    }
    if any(route.pattern is not None for route in routes):
        # New topics that match a pattern join at the next metadata refresh (librdkafka:
        # every 5 min): sooner, unless the app chose.
        config.setdefault("topic.metadata.refresh.interval.ms", 10_000)
    # The route's initial_offset wins; without one the app's own auto.offset.reset holds
    # (librdkafka's name, honoured), and Conveyor's default is to read from the start.
    initial = routes[0].initial_offset
    if initial is not None:
        config["auto.offset.reset"] = initial
    else:
        config.setdefault("auto.offset.reset", "earliest")
    config.pop("transactional.id", None)
    return config
