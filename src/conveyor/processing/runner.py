"""``Runner``: runs an app's routes: one listener per subscription group, one worker pool,
one scheduler for timed resumes, and one orderly stop.

The app builds it with a :class:`~conveyor.processing.context.ProcessingContext` and the
routes to consume; the runner never sees the App. A crashed listener or worker reports
through the context's one ``on_crash``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor.errors import NotAssignedError, WaitTimeoutError
from conveyor.instrumentation import events as ev
from conveyor.processing.collector import raise_collection_threshold
from conveyor.processing.event_loop import EventLoopThread
from conveyor.processing.listener import Listener
from conveyor.processing.partition_core import PartitionCore
from conveyor.processing.snapshot import JobState, ListenerState, PartitionState, PoolState
from conveyor.processing.timers import Timers
from conveyor.processing.workers import WorkerPool

if TYPE_CHECKING:
    from conveyor.processing.context import ProcessingContext
    from conveyor.routing.topic import Topic

__all__ = ["Runner"]

T = TypeVar("T")


_log = logging.getLogger("conveyor")


class Runner:
    """The processing engine of one app process (Karafka's runner + connection manager)."""

    def __init__(self, context: ProcessingContext, routes: list[Topic]) -> None:
        self.context = context
        settings = context.settings
        self._timers = Timers(settings.client_id)
        self.pool = WorkerPool(
            settings.concurrency,
            settings.client_id,
            lambda error: context.on_crash(error, "a worker"),
        )
        # Lanes of an async def consume() run here, concurrently (started on first use).
        self.event_loop = EventLoopThread(
            settings.client_id,
            lambda error: context.on_crash(error, "the event loop"),
            on_blocked=lambda task, seconds: _report_blocked(context, task, seconds),
            blocked_after=settings.event_loop_blocked_after,
        )
        self.listeners: list[Listener] = []
        self._restore_collector = raise_collection_threshold(None)
        try:
            default_initial = str(settings.kafka.get("auto.offset.reset", "earliest"))
            for name, group, members in _subscription_groups(routes, default_initial):
                self.listeners.append(
                    Listener(
                        context,
                        name,
                        group,
                        members,
                        self.pool.submit,
                        self._timers,
                        self.event_loop.submit,
                        self.pool.run_here,
                    )
                )
        except BaseException:  # a listener refused its settings: leave nothing running
            self.discard()
            raise

    def discard(self) -> None:
        """Release a runner that will not start (its clients, its threads)."""
        for listener in self.listeners:
            listener.close()
        self.pool.stop(1.0)
        self.event_loop.stop(1.0)  # started when an async sink tried to open

    def start(self) -> None:
        """Start every listener (each subscribes or assigns, then polls on its own thread)."""
        self._restore_collector = raise_collection_threshold(self.context.settings.gc_threshold)
        for listener in self.listeners:
            listener.start()

    def quiet(self) -> None:
        """Finish running batches, take no new ones, stay in the groups."""
        for listener in self.listeners:
            listener.quiet()

    def stop_polling(self) -> None:
        """Ask every listener to stop after its current poll (returns at once)."""
        for listener in self.listeners:
            listener.stop()

    def shut_down(
        self, deadline: float, drained: Callable[[EventLoopThread], None] | None = None
    ) -> bool:
        """Stop polling, let running batches finish (until the monotonic ``deadline``), run the
        ``shutdown()`` hooks, commit and close; then ``drained(event_loop)`` (the app closes its
        sinks there), then stop the workers. Returns whether everything finished in time."""
        self.stop_polling()
        for listener in self.listeners:
            listener.join(max(0.0, deadline - time.monotonic()))
        clean = True
        for listener in self.listeners:
            clean = listener.shut_down(deadline) and clean
        if drained is not None:
            drained(self.event_loop)
        clean = self.pool.stop(max(0.1, deadline - time.monotonic())) and clean
        clean = self.event_loop.stop(max(0.1, deadline - time.monotonic())) and clean
        self._timers.stop()
        self._restore_collector()
        return clean

    # -- acting on one partition --------------------------------------------------------------

    def on_partition(
        self,
        topic: str,
        partition: int,
        action: Callable[[PartitionCore, Listener], T],
        timeout: float = 10.0,
        group: str | None = None,
    ) -> T:
        """Run ``action(executor, listener)`` on the thread of the listener that has
        ``topic``/``partition`` assigned (librdkafka is only touched there), of consumer group
        ``group`` when given, and return what it returned.

        Raises:
            NotAssignedError: no listener of this process has the partition.
            WaitTimeoutError: the listener did not get to it within ``timeout``.
        """
        for listener in self.listeners:
            if group is not None and listener.group_id != group:
                continue
            if (topic, partition) not in listener.assigned():
                continue
            done = listener.call_with_executor(topic, partition, action, timeout)
            if done is None:
                raise WaitTimeoutError(
                    f"the listener of {topic}/{partition} did not act within {timeout:g} s"
                )
            result: T = done[0]
            return result
        where = f" in group {group}" if group is not None else ""
        raise NotAssignedError(f"{topic}/{partition} is not assigned to this process{where}")

    # -- reading ------------------------------------------------------------------------------

    def listener_states(self) -> list[ListenerState]:
        return [
            ListenerState(
                name=listener.name,
                consumer_group=listener.group_id,
                topics=tuple(listener.routes),
                state=listener.state,
                last_poll_at=listener.last_poll,
                partitions=len(listener.executors),
            )
            for listener in self.listeners
        ]

    def partition_states(self) -> tuple[list[PartitionState], list[JobState]]:
        partitions: list[PartitionState] = []
        jobs: list[JobState] = []
        now = time.time()
        for listener in self.listeners:
            committed = listener.committed()
            for (topic, partition), executor in sorted(listener.executors.copy().items()):
                consumer = executor.consumer
                marked = executor.marked
                high = executor.high_watermark
                done = marked if marked is not None else committed.get((topic, partition))
                if done is None:
                    done = executor.first_fetched
                lag = max(0, high - done) if high is not None and done is not None else None
                partitions.append(
                    PartitionState(
                        listener=listener.name,
                        consumer_group=listener.group_id,
                        topic=topic,
                        partition=partition,
                        consumer=type(consumer).__name__ if consumer is not None else None,
                        committed=committed.get((topic, partition)),
                        marked=marked,
                        high_watermark=high,
                        lag=lag,
                        lag_seconds=_lag_seconds(executor, lag, now),
                        pending=len(executor.pending),
                        paused=executor.held or executor.backpressure,
                        retrying=executor.attempt > 0,
                        attempt=executor.attempt,
                        lanes=tuple(executor.lane_states()),
                        collapsed=executor.collapsed,
                    )
                )
                for lane, running in executor.running_batches():
                    jobs.append(
                        JobState(
                            listener=listener.name,
                            topic=topic,
                            partition=partition,
                            first_offset=running.first_offset,
                            last_offset=running.last_offset,
                            count=running.count,
                            started_at=running.started_at,
                            virtual_partition=lane,
                        )
                    )
            # assigned, but nothing fetched yet: no executor, still the listener's partition
            for topic, partition in sorted(listener.assigned() - set(listener.executors.copy())):
                partitions.append(
                    PartitionState(
                        listener=listener.name,
                        consumer_group=listener.group_id,
                        topic=topic,
                        partition=partition,
                        consumer=None,
                        committed=committed.get((topic, partition)),
                        marked=None,
                        high_watermark=None,
                        lag=None,
                        pending=0,
                        paused=False,
                        retrying=False,
                        attempt=0,
                    )
                )
        return partitions, jobs

    def pool_state(self) -> PoolState:
        usage = self.pool.usage()
        return PoolState(
            size=usage.size,
            busy=usage.busy,
            queued=usage.queued,
            busy_seconds=usage.busy_seconds,
            utilization=usage.utilization,
        )


def _report_blocked(context: ProcessingContext, task: str, seconds: float) -> None:
    """A lane held the app's event loop too long: an event, and a warning (every other lane
    of every partition waited meanwhile)."""
    if ev.EVENT_LOOP_BLOCKED in context.monitor.subscribed:
        context.monitor.instrument(ev.EVENT_LOOP_BLOCKED, task=task, seconds=seconds)
    _log.warning(
        "%s has held the event loop for %.3f s: every async lane waits meanwhile (a blocking "
        "call in async def consume()? await it, or run it with asyncio.to_thread)",
        task,
        seconds,
    )


def _subscription_groups(
    routes: list[Topic], default_initial: str
) -> list[tuple[str, str, list[Topic]]]:
    """One listener per (consumer group, subscription group, assignment kind, initial offset,
    the route's own kafka settings): its name, its group id and its routes. A route without
    ``initial_offset`` starts where the app's ``auto.offset.reset`` says (``default_initial``)."""
    groups: dict[tuple[str, str, bool, str, tuple[tuple[str, Any], ...]], list[Topic]] = {}
    for route in routes:
        initial = route.initial_offset or default_initial
        own = tuple(sorted(route.kafka.items()))
        key = (route.consumer_group, route.subscription_group, route.direct, initial, own)
        groups.setdefault(key, []).append(route)
    named = []
    for (group, subscription, direct, initial, own), members in groups.items():
        name = subscription if not direct else f"{subscription}-assigned"
        if initial != default_initial:
            name = f"{name}-{initial}"
        if own:
            digest = hashlib.sha1(repr(own).encode(), usedforsecurity=False).hexdigest()[:6]
            name = f"{name}-{digest}"
        named.append((name, group, members))
    return named


def _lag_seconds(executor: PartitionCore, lag: int | None, now: float) -> float | None:
    if lag is None:
        return None
    if lag == 0:
        return 0.0
    waiting = executor.first_waiting()
    if waiting is not None:
        kind, milliseconds = waiting.timestamp()
        if kind:
            return max(0.0, now - float(milliseconds) / 1000)
    last = executor.hooks.last_timestamp
    return None if last is None else max(0.0, now - last)
