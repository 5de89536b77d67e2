"""``Latency`` (``app.latency``): where a message's time goes, stage by stage, per topic —
without OpenTelemetry.

The stages of one message, each a histogram per topic:

====================  ======================================================================
``produce→append``    the producer's send (the ``conveyor-produced-at`` header) to the
                      broker's append (the message timestamp, with the topic's
                      ``message.timestamp.type=LogAppendTime``; not recorded otherwise)
``append→poll``       the message timestamp to the poll that fetched it (with create-time
                      timestamps: from the send, so it includes the trip to the broker)
``poll→start``        waiting for a worker, and for the batches before it
``start→end``         its batch's ``consume()``
``end→commit``        ``consume()`` returned to the listener committing its offset (commits
                      run every ``auto.commit.interval.ms``; this is mostly that interval)
``produce→end``       the whole way, send to ``consume()`` returned
``poll→end``          fetched to ``consume()`` returned: the time inside the app (for a sink
                      route: polled → acknowledged by the sink)
====================  ======================================================================

Times are wall-clock (``time.time()``) so that they compare with message timestamps; the
producer's stamp has microseconds, broker timestamps milliseconds. Producers of the app add
the stamp while latency is enabled (``stamp=True``), so messages from elsewhere lack it and
are measured from their timestamp only.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.instrumentation import events as ev
from conveyor.producer.hooks import SendHookSwitch
from conveyor.tracing.histogram import Histogram, Summary

if TYPE_CHECKING:
    from conveyor.instrumentation import Event, Monitor
    from conveyor.producer import Producer

__all__ = ["PRODUCED_AT", "STAGES", "Latency", "PollTimes"]

PRODUCED_AT = "conveyor-produced-at"
"""The header with the send time, in microseconds since the epoch."""
PRODUCE_APPEND, APPEND_POLL, POLL_START = "produce→append", "append→poll", "poll→start"
START_END, END_COMMIT, TOTAL = "start→end", "end→commit", "produce→end"
POLL_END = "poll→end"
STAGES = (PRODUCE_APPEND, APPEND_POLL, POLL_START, START_END, END_COMMIT, TOTAL, POLL_END)
"""The stage names, in the order a message passes them (and the whole way last)."""

_LOG_APPEND_TIME = 2
_MAX_UNCOMMITTED = 10_000  # batches per partition waiting for their commit, at most


class PollTimes:
    """When the messages of one partition were fetched: ``(last offset, wall time)`` per
    fetch, kept by the partition's executor while latency is enabled."""

    __slots__ = ("_fetches", "_in_order")

    def __init__(self, in_order: bool = True) -> None:
        self._fetches: deque[tuple[int, float]] = deque()
        # Batches in offset order (one job per partition) may forget what is behind them;
        # lanes finish out of order, so their executor forgets explicitly (forget_before).
        self._in_order = in_order

    def fetched(self, last_offset: int) -> None:
        self._fetches.append((last_offset, time.time()))

    def polled_at(self, offset: int, default: float) -> float:
        """When ``offset`` was fetched; forgets fetches whose messages all came before it."""
        fetches = self._fetches
        try:  # a seek may clear the fetches from the listener's thread meanwhile
            if not self._in_order:
                for last, at in fetches:
                    if last >= offset:
                        return at
                return default
            while fetches[0][0] < offset:
                fetches.popleft()
            return fetches[0][1]
        except (IndexError, RuntimeError):  # RuntimeError: changed while iterated
            return default

    def forget_before(self, offset: int) -> None:
        """Forget the fetches whose messages all came before ``offset``."""
        fetches = self._fetches
        try:
            while fetches[0][0] < offset:
                fetches.popleft()
        except IndexError:
            return

    def clear(self) -> None:
        self._fetches.clear()


def _produced_at(headers: Sequence[tuple[str, Any]] | None) -> float | None:
    if not headers:
        return None
    for name, value in headers:
        if name == PRODUCED_AT:
            try:
                return int(value) / 1e6
            except (TypeError, ValueError, OverflowError):
                return None
    return None


class Latency:
    """Per-stage latency histograms of the topics this app consumes (``app.latency``).

    Example::

        app.latency.enable()
        ...
        for topic, stages in app.latency.snapshot().items():
            print(topic, stages["produce→end"].p99)

    Every batch also emits ``latency.measured`` on the monitor while someone listens.
    """

    def __init__(self, monitor: Monitor | None = None) -> None:
        self.active = False
        self.stamp = False
        self._monitor = monitor
        self._lock = threading.Lock()
        self._topics: dict[str, dict[str, Histogram]] = {}
        self._uncommitted: dict[tuple[str, int], deque[tuple[int, float, int]]] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._stamping = SendHookSwitch(self)

    # -- switching ----------------------------------------------------------------------------

    def enable(self, *, stamp: bool = True) -> None:
        """Measure from now on; with ``stamp`` the app's producers add the send-time header."""
        if not isinstance(stamp, bool):
            raise ConfigurationError("stamp must be True or False", "stamp")
        with self._lock:
            self.active = True
            self.stamp = stamp
            self._stamping.switch(stamp)
            if self._monitor is not None and self._unsubscribe is None:
                self._unsubscribe = self._monitor.subscribe(ev.OFFSETS_COMMITTED, self._committed)

    def disable(self) -> None:
        with self._lock:
            self.active = False
            self._stamping.switch(False)
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None

    def attach(self, producer: Producer) -> None:
        """Stamp what ``producer`` sends while latency is enabled with ``stamp``."""
        self._stamping.attach(producer)

    def reset(self) -> None:
        """Forget everything measured so far."""
        with self._lock:
            self._topics.clear()
            self._uncommitted.clear()

    # -- a producer's send hook ---------------------------------------------------------------

    def sending(
        self, topic: str, key: Any, partition: int, headers: list[tuple[str, Any]] | None
    ) -> tuple[list[tuple[str, Any]], None]:
        stamped = [pair for pair in headers or () if pair[0] != PRODUCED_AT]
        stamped.append((PRODUCED_AT, str(time.time_ns() // 1000)))
        return stamped, None

    # -- measuring ----------------------------------------------------------------------------

    def consumed(
        self,
        topic: str,
        partition: int,
        batch: Sequence[Any],
        polls: PollTimes,
        started: float,
        ended: float,
    ) -> None:
        """A batch of raw messages whose ``consume()`` ran from ``started`` to ``ended``."""
        count = len(batch)
        sums = dict.fromkeys((PRODUCE_APPEND, APPEND_POLL, POLL_START, TOTAL, POLL_END), 0.0)
        counts = dict.fromkeys(sums, 0)
        samples: list[tuple[str, float]] = []
        for raw in batch:
            polled = polls.polled_at(raw.offset(), started)
            kind, milliseconds = raw.timestamp()
            produced = _produced_at(raw.headers())
            stamped = milliseconds / 1000 if kind else None
            if kind == _LOG_APPEND_TIME:
                appended = stamped
                if produced is not None:
                    samples.append((PRODUCE_APPEND, max(0.0, appended - produced)))  # type: ignore[operator]
            else:
                appended = produced if produced is not None else stamped
            if appended is not None:
                samples.append((APPEND_POLL, max(0.0, polled - appended)))
            samples.append((POLL_START, max(0.0, started - polled)))
            samples.append((POLL_END, max(0.0, ended - polled)))
            origin = produced if produced is not None else stamped
            if origin is not None:
                samples.append((TOTAL, max(0.0, ended - origin)))
        last = batch[-1].offset() if count else -1
        if count:
            polls.polled_at(last + 1, started)
        with self._lock:
            stages = self._topics.get(topic)
            if stages is None:
                stages = self._topics[topic] = {stage: Histogram() for stage in STAGES}
            for stage, seconds in samples:
                stages[stage].record(seconds)
                sums[stage] += seconds
                counts[stage] += 1
            stages[START_END].record(ended - started, count)
            waiting = self._uncommitted.setdefault((topic, partition), deque())
            waiting.append((last + 1, ended, count))
            if len(waiting) > _MAX_UNCOMMITTED:
                waiting.popleft()
        monitor = self._monitor
        if monitor is not None and ev.LATENCY_MEASURED in monitor.subscribed:
            means = {stage: sums[stage] / counts[stage] for stage in sums if counts[stage]}
            means[START_END] = ended - started
            monitor.instrument(
                ev.LATENCY_MEASURED, topic=topic, partition=partition, count=count, stages=means
            )

    def _committed(self, event: Event) -> None:
        committed_at = event["committed_at"]
        with self._lock:
            for topic, partition, offset in event["offsets"]:
                waiting = self._uncommitted.get((topic, partition))
                if not waiting:
                    continue
                stages = self._topics.get(topic)
                while waiting and waiting[0][0] <= offset:
                    _next, ended, count = waiting.popleft()
                    if stages is not None:
                        stages[END_COMMIT].record(max(0.0, committed_at - ended), count)

    def forget(self, topic: str, partition: int) -> None:
        """A partition was revoked: its batches waiting for a commit will not get one here."""
        with self._lock:
            self._uncommitted.pop((topic, partition), None)

    # -- reading ------------------------------------------------------------------------------

    def histogram(self, topic: str, stage: str) -> Histogram:
        """A copy of one stage's histogram of ``topic`` (empty when nothing was recorded):
        for quantiles the summary leaves out (``.quantile(0.999)``)."""
        with self._lock:
            histogram = self._topics.get(topic, {}).get(stage)
            return Histogram() if histogram is None else histogram.copy()

    def snapshot(self) -> dict[str, dict[str, Summary]]:
        """Per topic, per stage (see :data:`STAGES`): count, mean, p50, p90, p99 and max in
        seconds. Stages nothing was measured for are left out."""
        with self._lock:
            return {
                topic: {
                    stage: histogram.summary()
                    for stage, histogram in stages.items()
                    if histogram.count
                }
                for topic, stages in self._topics.items()
            }
