"""Scheduled messages: ``producer.produce_at(when, topic=..., ...)`` and their dispatcher.

A scheduled message waits in a schedules topic (compacted; an app's own unless it names one:
``<group>_schedules`` after its consumer group, see :func:`~conveyor.schedules.wire.app_topic`),
keyed by its schedule id, with its destination in ``conveyor-schedule-*`` headers. An app
that runs ``app.schedules.enable()`` reads that topic in its consumer group and sends each
message to its topic when its time comes, then writes a tombstone for its id;
``cancel_scheduled(id)`` writes a tombstone first. The app's producers write there when
given no ``schedules_topic`` (:meth:`Schedules.attach`). The schedules partition's offset is
committed only up to the oldest schedule not yet sent or cancelled, so a restart loads what
is still pending.
Delivery is at least once: a crash between sending a message and writing its tombstone
sends it again after the restart.

A record on the schedules topic makes the app produce, with its own credentials, to the
topic the record names: so only topics the app allows are sent to (its own routes' topics by
default, see :meth:`Schedules.enable`); a schedule for any other is refused, reported and
tombstoned, never sent.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import re
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conveyor.consumer import Consumer
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.instrumentation import events as ev
from conveyor.messages import records_of
from conveyor.schedules.wire import (
    KEY,
    NULL,
    OFFSET,
    OURS,
    PARTITION,
    STATE,
    TOPIC,
    app_topic,
    cancels,
    scheduled_for,
)

if TYPE_CHECKING:
    from conveyor.partition import PartitionHandle
    from conveyor.producer import Producer
    from conveyor.routing.host import RoutedHost
    from conveyor.routing.topic import Topic

__all__ = ["ANY_TOPIC", "Schedules"]

ANY_TOPIC = "*"
"""``allowed_topics`` that lets a schedule go to any topic the app's credentials reach."""

_log = logging.getLogger("conveyor.schedules")
_MAX_WAIT = 60.0  # seconds the dispatcher sleeps at most between looks


@dataclass
class _Entry:
    id: str
    partition: int
    offset: int
    at: float  # epoch seconds
    raw: Any
    refused: bool = False  # for a topic not allowed: tombstoned at once, never sent
    reported: bool = False  # its refusal was reported (once, however often the tombstone fails)


class Schedules:
    """Dispatches scheduled messages for an app (``app.schedules``).

    Example::

        app.schedules.enable()                        # before app.run()
        producer.produce_at(datetime.now(UTC) + timedelta(minutes=5), topic="reminders",
                            payload=b"...", key="user-7")
    """

    def __init__(self, app: RoutedHost) -> None:
        self.app = app
        self.topic = app_topic(app.routes.default_group)
        """The schedules topic: the app's own (``<group>_schedules``) unless :meth:`enable`
        names another."""
        self.enabled = False
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: dict[int, dict[str, _Entry]] = {}
        self._executors: dict[int, PartitionHandle] = {}
        self._last_seen: dict[int, int] = {}
        self._caught_up: set[int] = set()
        self._heaps: dict[int, list[tuple[float, int, str]]] = {}  # per partition: (at, seq, id)
        self._sequence = itertools.count()
        self._allowed: tuple[str | re.Pattern[str], ...] | None = ()
        self._excluded: set[str] = set()
        self.refused = 0
        """Schedules refused for their destination (a topic not allowed)."""
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._route: Topic | None = None  # the schedules topic's route, once enabled
        self._by_default = False  # enabled by ensure_enabled(), not by the app

    def enable(
        self,
        *,
        topic: str | None = None,
        partitions: int = 3,
        replication_factor: int | None = None,
        allowed_topics: Iterable[str | re.Pattern[str]] | str = (),
    ) -> None:
        """Read ``topic`` (declared compacted, with ``partitions``, for ``conveyor topics
        migrate``) in the app's default consumer group and send each scheduled message when
        its time comes. Call before ``app.run()``.

        ``topic`` defaults to the app's own, ``<group>_schedules`` after its consumer group
        (``conveyor_schedules`` for an app with the default name): two apps on one cluster
        do not send each other's schedules. An app that used the shared
        ``conveyor_schedules`` before keeps it by naming it. The app's producers write there
        when ``produce_at`` and ``cancel_scheduled`` are given no ``schedules_topic``.

        Only topics the app routes (any route: consumed, declared inactive, by a pattern;
        job queues too) and ``allowed_topics`` (names, or compiled patterns that must match
        the whole name) are sent to: whoever can write the schedules topic could otherwise
        make the app produce anywhere its credentials reach. A schedule for another topic is
        refused (an ``error.occurred`` event of type ``schedule.refused``) and tombstoned.
        ``allowed_topics="*"`` allows every topic.

        The first ``@app.job`` enables it with these defaults if the app had not; a call
        after that sets it up as given instead. A second call with the same settings
        changes nothing.

        Raises:
            ConfigurationError: enabled twice with other settings, a bad topic, or a bad
                ``allowed_topics``.
        """
        allowed = _allowed_topics(allowed_topics)
        if topic is None:
            topic = self.topic
        elif not isinstance(topic, str) or not topic:
            raise ConfigurationError(f"topic must be a topic's name, got {topic!r}", "topic")
        if self.enabled:
            self._enable_again(topic, partitions, replication_factor, allowed)
            return
        self._allowed = allowed
        self._route = self._declare(topic, partitions, replication_factor)
        self._use_topic(topic)
        self.enabled = True
        self.app.monitor.subscribe(ev.APP_RUNNING, lambda _event: self._start())
        self.app.add_closing_hook(self._stop)

    def ensure_enabled(self) -> None:
        """Enable with the defaults unless enabled already (for the features that need
        scheduled messages: job queues, for their delayed jobs and retries); the app's own
        :meth:`enable` after it sets it up as the app says."""
        if not self.enabled:
            self.enable()
            self._by_default = True

    def _enable_again(
        self,
        topic: str,
        partitions: int,
        replication_factor: int | None,
        allowed: tuple[str | re.Pattern[str], ...] | None,
    ) -> None:
        route = self._route
        assert route is not None, "enabled: its route is declared"
        declared = (route.name, route.partitions, route.replication_factor)
        wanted = (topic, partitions, replication_factor)
        if self._by_default:  # enabled for the job queues: the app's own settings now
            if wanted != declared:
                self.app.routes.remove(route)
                try:
                    self._route = self._declare(topic, partitions, replication_factor)
                except ConfigurationError:  # a bad setting: the defaults stay
                    self._route = self._declare(
                        route.name, route.partitions or 3, route.replication_factor
                    )
                    raise
                self._use_topic(topic)
            self._by_default = False
            self._allowed = allowed
            return
        if wanted != declared or allowed != self._allowed:
            raise ConfigurationError(
                f"app.schedules.enable() was called twice with other settings: first topic "
                f"{declared[0]!r}, partitions {declared[1]}, replication_factor {declared[2]}",
                "schedules",
            )

    def _declare(self, topic: str, partitions: int, replication_factor: int | None) -> Topic:
        schedules = self

        class ScheduledMessages(Consumer):
            """Loads the schedules of its partition (built in: ``app.schedules``)."""

            def consume(self) -> None:
                schedules._load(self._executor, list(self.messages))

            def reached_end(self) -> None:
                schedules._caught_up_with(self._executor)

            def revoked(self) -> None:
                schedules._forget(self._executor)

            def shutdown(self) -> None:
                schedules._forget(self._executor)

        return self.app.routes.topic(
            topic,
            ScheduledMessages,
            partitions=partitions,
            replication_factor=replication_factor,
            config={"cleanup.policy": "compact"},
            manual_offset_management=True,
            initial_offset="earliest",
            kafka={"enable.partition.eof": True},
        )

    def _use_topic(self, topic: str) -> None:
        self.topic = topic
        for producer in list(self._producers):  # made before: they write there too
            producer.schedules_topic = topic

    def attach(self, producer: Producer) -> None:
        """Make this app's schedules topic the one ``producer`` (one of the app's) writes
        scheduled messages and cancellations to when given no ``schedules_topic``."""
        producer.schedules_topic = self.topic
        self._producers.add(producer)

    # -- loading (worker threads) -------------------------------------------------------------

    def _load(self, executor: PartitionHandle, batch: list[Any]) -> None:
        partition = executor.partition
        with self._changed:
            if executor.revoked or self._executors.get(partition, executor) is not executor:
                return  # a batch that ran on after its partition was taken away
            self._executors[partition] = executor
            pending = self._pending.setdefault(partition, {})
            heap = self._heaps.setdefault(partition, [])
            for raw in records_of(batch):
                schedule_id = (raw.key() or b"").decode("utf-8", "replace")
                self._last_seen[partition] = raw.offset()
                headers = dict(raw.headers() or ())
                if raw.value() is None:  # cancelled, or sent (then only that version of it)
                    current = pending.get(schedule_id)
                    if cancels(headers, None if current is None else current.offset):
                        pending.pop(schedule_id, None)
                    continue
                found = scheduled_for(headers)
                if found is None:
                    _log.error(
                        "%s/%s@%s is not a scheduled message (malformed %s headers): skipped",
                        raw.topic(),
                        partition,
                        raw.offset(),
                        "conveyor-schedule-*",
                    )
                    continue
                at, target, _ = found
                entry = _Entry(schedule_id, partition, raw.offset(), at, raw)
                if not self.allows(target):  # refused now: it holds no offset back until due
                    entry.refused, entry.at = True, min(at, time.time())
                pending[schedule_id] = entry  # a later one with the same id replaces it
                heapq.heappush(heap, (entry.at, next(self._sequence), schedule_id))
            high = executor.high_watermark
            last = self._last_seen.get(partition)
            if high is not None and last is not None and last + 1 >= high:
                # Read to the end as of this fetch: a schedule sent before a restart has its
                # tombstone behind it, so nothing is sent before the partition got this far.
                self._caught_up.add(partition)
            self._changed.notify_all()
        self._mark(partition)

    def _caught_up_with(self, executor: PartitionHandle) -> None:
        with self._changed:
            self._executors[executor.partition] = executor
            self._pending.setdefault(executor.partition, {})
            self._caught_up.add(executor.partition)
            self._changed.notify_all()

    def _forget(self, executor: PartitionHandle) -> None:
        partition = executor.partition
        with self._changed:
            if self._executors.get(partition, executor) is not executor:
                return  # the partition came back meanwhile: its new state stays
            self._pending.pop(partition, None)
            self._heaps.pop(partition, None)
            self._executors.pop(partition, None)
            self._caught_up.discard(partition)
            self._last_seen.pop(partition, None)
            self._changed.notify_all()

    def _mark(self, partition: int) -> None:
        """Commit the partition up to its oldest pending schedule (or all it read)."""
        with self._lock:
            executor = self._executors.get(partition)
            pending = self._pending.get(partition, {})
            last = self._last_seen.get(partition)
            if executor is None or last is None:
                return
            target = min((e.offset for e in pending.values()), default=last + 1)
        executor.mark(target, sync=False)

    def pending(self) -> int:
        """How many schedules this process holds, not yet sent."""
        with self._lock:
            return sum(len(entries) for entries in self._pending.values())

    # -- dispatching (a thread of its own) ----------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="conveyor-schedules", daemon=True
            )
            self._thread.start()

    def _stop(self) -> None:
        self._stopped.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(10)

    def _due(self) -> _Entry | float | None:
        """The entry to send now, else the seconds until the next (``None``: none). Only
        partitions read to their end count: one that is not does not hold back the others."""
        now = time.time()
        best: tuple[float, int] | None = None
        for partition in self._caught_up:
            heap = self._heaps.get(partition)
            pending = self._pending.get(partition, {})
            while heap:
                at, _, schedule_id = heap[0]
                entry = pending.get(schedule_id)
                if entry is not None and entry.at == at:
                    break
                heapq.heappop(heap)  # sent, cancelled or replaced
            if heap and (best is None or heap[0][0] < best[0]):
                best = (heap[0][0], partition)
        if best is None:
            return None
        at, partition = best
        if at > now:
            return at - now
        _, _, schedule_id = heapq.heappop(self._heaps[partition])
        return self._pending[partition][schedule_id]

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                with self._changed:
                    due = self._due()
                    if not isinstance(due, _Entry):
                        # woken by new schedules, or at the time (capped: a schedule far off
                        # must not overflow the wait)
                        self._changed.wait(
                            timeout=_MAX_WAIT if due is None else min(due, _MAX_WAIT)
                        )
                        continue
                self._send(due)
            except Exception:  # never let the dispatcher die: log and go on after a pause
                _log.exception("the schedules dispatcher failed; going on in 1 s")
                self._stopped.wait(1.0)

    def exclude(self, topic: str) -> None:
        """Never send a schedule to ``topic``, even though the app routes it: a control topic
        of the app's own (the recurring tasks' topic; the schedules topic is excluded
        already), where a record would steer the app rather than be processed by it."""
        self._excluded.add(topic)

    def allows(self, topic: str) -> bool:
        """Whether a schedule may be sent to ``topic`` (see :meth:`enable`)."""
        allowed = self._allowed
        if allowed is None:
            return True
        if topic == self.topic or topic in self._excluded:
            return False
        if any(route.matches(topic) for route in self.app.routes):
            return True
        return any(
            name == topic if isinstance(name, str) else name.fullmatch(topic) is not None
            for name in allowed
        )

    def _report_refused(self, entry: _Entry, target: str) -> None:
        """A schedule for a topic not allowed: counted and reported, once."""
        if entry.reported:
            return
        entry.reported = True
        self.refused += 1
        error = ConveyorError(
            f"scheduled {entry.id} is for {target!r}, which this app does not route: refused "
            "(app.schedules.enable(allowed_topics=[...]) allows it)"
        )
        monitor = self.app.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="schedule.refused",
                error=error,
                topic=target,
                schedule=entry.id,
            )
        else:
            _log.error("%s", error)

    def _send(self, entry: _Entry) -> None:
        raw = entry.raw
        headers = raw.headers() or []
        own = dict(headers)
        target = own[TOPIC].decode()
        partition = int(own[PARTITION]) if PARTITION in own else None
        payload = None if NULL in own else raw.value()
        try:
            if entry.refused:
                self._report_refused(entry, target)
            else:
                self.app.producer.produce_sync(
                    topic=target,
                    payload=payload,
                    key=own.get(KEY),
                    headers=[(n, v) for n, v in headers if n not in OURS],
                    partition=partition,
                )
            self.app.producer.produce_sync(
                topic=self.topic,
                key=entry.id,
                payload=None,
                partition=entry.partition,
                headers=[
                    (STATE, "refused" if entry.refused else "dispatched"),
                    (OFFSET, str(entry.offset)),
                ],
            )
        except Exception as error:  # sent again after a pause: nothing is dropped
            _log.error(
                "could not %s scheduled %s (for %s: %r); trying again in 1 s",
                "tombstone refused" if entry.refused else "send",
                entry.id,
                target,
                error,
            )
            with self._changed:
                entry.at = time.time() + 1.0
                heap = self._heaps.setdefault(entry.partition, [])
                heapq.heappush(heap, (entry.at, next(self._sequence), entry.id))
            return
        with self._changed:
            pending = self._pending.get(entry.partition, {})
            if pending.get(entry.id) is entry:
                del pending[entry.id]
        self._mark(entry.partition)
        if not entry.refused and ev.SCHEDULE_DISPATCHED in self.app.monitor.subscribed:
            self.app.monitor.instrument(
                ev.SCHEDULE_DISPATCHED,
                id=entry.id,
                topic=target,
                late=max(0.0, time.time() - entry.at),
            )


def _allowed_topics(
    value: Iterable[str | re.Pattern[str]] | str,
) -> tuple[str | re.Pattern[str], ...] | None:
    """``allowed_topics`` checked: ``None`` for every topic, else the names and patterns."""
    if value == ANY_TOPIC:
        return None
    if isinstance(value, str | re.Pattern):
        value = [value]
    try:
        allowed = tuple(value)
    except TypeError:
        allowed = (value,)  # type: ignore[assignment]
    for name in allowed:
        if not (isinstance(name, re.Pattern) or (isinstance(name, str) and name)):
            raise ConfigurationError(
                f"allowed_topics takes topic names and compiled patterns (or '*'), not {name!r}",
                "allowed_topics",
            )
    return allowed
