"""What a listener reports: its commits (and those the group refused), and what went wrong
(librdkafka's client and fetch errors, a poll past ``max.poll.interval.ms`` naming the batch
that held it, committed offsets that do not come, with the fence of a crashed predecessor's
transaction), librdkafka's statistics; and the librdkafka settings of a listener's consumer
(:func:`consumer_config`)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from conveyor.errors import KafkaError
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog

if TYPE_CHECKING:
    from conveyor.processing.commits import Commits
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.partition_core import PartitionCore
    from conveyor.routing.topic import Topic
    from conveyor.settings import AppSettings

__all__ = ["ListenerReports", "consumer_config"]

_log = logging.getLogger("conveyor.processing")
_refusals = RateLimitedLog(_log)  # a group that keeps refusing: one line per interval


class ListenerReports:
    """The reporting half of a :class:`~conveyor.processing.listener.Listener`: what it
    reads of the listener is declared here, and set by the listener."""

    name: str
    context: ProcessingContext
    executors: dict[Any, PartitionCore]
    _stopping: threading.Event
    _commits: Commits

    @property
    def group_id(self) -> str:
        raise NotImplementedError

    def _report_commit(
        self, offsets: list[tuple[str, int, int]], sync: bool, started: float
    ) -> None:
        monitor = self.context.monitor
        if ev.OFFSETS_COMMITTED in monitor.subscribed:
            monitor.instrument(
                ev.OFFSETS_COMMITTED, listener=self.name, group=self.group_id, offsets=offsets,
                sync=sync, duration=time.perf_counter() - started, committed_at=time.time(),
            )  # fmt: skip

    def _on_commit_refused(
        self, offsets: list[tuple[str, int, int]], error: KafkaError, sync: bool
    ) -> None:
        """The group refused a commit (on the listener's thread): the next commit sends those
        offsets again while the partitions stay assigned; reported, and logged."""
        self._commits.refused(offsets)
        monitor = self.context.monitor
        if ev.OFFSETS_COMMIT_REFUSED in monitor.subscribed:
            monitor.instrument(
                ev.OFFSETS_COMMIT_REFUSED, listener=self.name, group=self.group_id,
                offsets=offsets, sync=sync, error=error,
            )  # fmt: skip
        _refusals.warning(
            f"{self.name} {error.name}",
            "%s: %s. Not committed: the next commit sends it again while the partitions stay "
            "assigned here, else their next owner reads from the last committed offset (some "
            "messages again)", self.name, error,
        )  # fmt: skip

    def _on_error(self, error: KafkaError) -> None:
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="connection.listener.error", listener=self.name, error=error
            )

    def _on_poll_interval_exceeded(self, error: KafkaError) -> None:
        """librdkafka left the group because this client did not poll within
        max.poll.interval.ms: not a fetch error of some topic, but (mostly) a batch that held
        the listener's thread; say which, and for how long."""
        now = time.time()
        longest: tuple[float, PartitionCore] | None = None
        for executor in list(self.executors.values()):
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
            code=error.code, name=error.name,
        )  # fmt: skip
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="consumer.poll_interval.exceeded", listener=self.name,
                error=failure, topic=longest[1].topic if longest else None,
                partition=longest[1].partition if longest else None,
            )  # fmt: skip
        else:
            _log.error("%s", failure)

    def _on_offsets_error(self, error: KafkaError) -> None:
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="consumer.offsets.error", listener=self.name, error=error
            )
        else:
            _log.warning("%s: %s (asking again)", self.name, error)

    def _fence(self) -> None:
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
            monitor = self.context.monitor
            if ev.ERROR_OCCURRED in monitor.subscribed:
                monitor.instrument(
                    ev.ERROR_OCCURRED, type="transaction.fence.error", listener=self.name,
                    error=exc,
                )  # fmt: skip
            else:
                _log.warning("%s: could not fence a predecessor's transaction: %s", self.name, exc)

    def _on_statistics(self, raw: str) -> None:
        monitor = self.context.monitor
        if ev.STATISTICS_EMITTED in monitor.subscribed:
            monitor.instrument(
                ev.STATISTICS_EMITTED, listener=self.name, statistics=json.loads(raw)
            )

    def _on_fetch_error(self, error: KafkaError) -> None:
        if error.name == "_MAX_POLL_EXCEEDED":
            self._on_poll_interval_exceeded(error)
            return
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="consumer.fetch.error", listener=self.name, error=error,
                topic=getattr(error, "topic", None), partition=getattr(error, "partition", None),
            )  # fmt: skip
        else:
            _log.error("%s: %s", self.name, error)


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
