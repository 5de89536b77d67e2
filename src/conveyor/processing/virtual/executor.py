"""Virtual partitions: one topic-partition's messages run in parallel lanes, in order per lane.

The listener adds fetched messages as for any partition. The executor hands them out to
lanes (the route's partitioner and reducer pick each message's lane) and records each in
its :class:`~conveyor.processing.virtual.tracker.OffsetTracker`; every lane with work runs as
a job on the worker pool, taking batches of up to ``max_messages`` of its own messages in
offset order, on its own consumer instance. A finished batch finishes its offsets in the
tracker, and the partition's marked offset is the tracker's committable one: the first
message not finished, whatever order the lanes finish in.

Failures: when a lane's ``consume()`` raises, the partition stops handing out, lets the other
lanes finish what they run, then *collapses*: every message not finished (also those other
lanes finished, with ``retry_finished_lanes``) goes, in offset order, to one lane, which runs
after the topic's back-off in strict order, with the failure policy of a partition without
lanes (retries, then dispatch or skip of the first unfinished message), until the partition
passed the last offset handed out before the failure; then the lanes run again. A
partitioner or reducer that raises collapses the partition the same way (without back-off),
so the message still runs, in order.

Messages handed out and not yet committable are bounded (the partition's high-water mark),
so a slow lane holds the others back instead of growing memory without end.

The executor owns its collaborators: its lanes (each a
:class:`~conveyor.processing.virtual.lane.Lane`, which asks it through
:class:`~conveyor.processing.virtual.lane.LaneOwner`), the
:class:`~conveyor.processing.virtual.tracker.OffsetTracker`, the
:class:`~conveyor.processing.virtual.collapse.Collapse` after a failure, the route's
:class:`~conveyor.processing.virtual.linger.Linger` and its
:class:`~conveyor.processing.virtual.reports.LaneReports`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.consumer import attach_partition_handle
from conveyor.instrumentation import events as ev
from conveyor.messages import Message
from conveyor.processing.model_check import check_models
from conveyor.processing.partition_core import PartitionCore, RunningBatch
from conveyor.processing.snapshot import LaneState
from conveyor.processing.strategies import RETRY
from conveyor.processing.virtual.collapse import Collapse, Failure
from conveyor.processing.virtual.lane import Lane, queued
from conveyor.processing.virtual.lane_stores import LaneStores
from conveyor.processing.virtual.lanes import LaneAssigner
from conveyor.processing.virtual.linger import Linger
from conveyor.processing.virtual.reports import LaneReports
from conveyor.processing.virtual.tracker import OffsetTracker
from conveyor.tracing.latency import PollTimes

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.listener_actions import ListenerActions
    from conveyor.processing.strategies import FailurePolicy
    from conveyor.processing.timers import Timers
    from conveyor.routing.topic import Topic
    from conveyor.state.view import State

__all__ = ["VirtualPartitionExecutor"]


class VirtualPartitionExecutor(PartitionCore):
    """The executor of a partition whose messages run in lanes (see the module); what it
    shares with :class:`~conveyor.processing.executor.PartitionExecutor` is their core."""

    def __init__(
        self,
        listener: ListenerActions,
        route: Topic,
        partition: int,
        context: ProcessingContext,
        policy: FailurePolicy,
        timers: Timers,
        topic: str | None = None,
    ) -> None:
        # lanes finish out of order: the fetch times are forgotten by the committable offset
        polls = PollTimes(in_order=False)
        super().__init__(listener, route, partition, context, policy, timers, topic, polls=polls)
        settings = route.virtual_partitions
        assert settings is not None
        count = settings.max_partitions or context.settings.concurrency
        self.assigner = LaneAssigner(settings, count, route.deserializers)
        self.retry_finished_lanes = settings.retry_finished_lanes
        self._in_flight_limit = settings.max_in_flight or self._high_water
        self.linger = (
            Linger(settings.linger, self.max_messages, timers, self.lock, self.run)
            if settings.linger
            else None
        )
        """With the route's ``linger``: when a lane is ready to run."""
        self.lanes = [Lane(self, index) for index in range(count)]
        self.tracker = OffsetTracker()
        consumer_class = route.consumer_class
        self.asynchronous = consumer_class is not None and inspect.iscoroutinefunction(
            consumer_class.consume
        )
        """Lanes run as tasks on the app's event loop (``async def consume()``), not as jobs."""
        self.active_lanes = 0
        self.collapse = Collapse()
        """A failure waiting for the lanes, and the offset a collapse runs through."""
        self.reports = LaneReports(self.topic, partition, context.monitor)
        """What the lanes report when something goes wrong."""
        self._ticking = False
        self._after_lock: list[Callable[[], None]] = []  # run by _start, once the lock is let go
        self.lane_stores = None if self.stores is None else LaneStores(self, self.stores)
        """Its lanes' writes over the partition's stores (a route with ``state=``)."""
        if self.lane_stores is not None:  # opened (restored) before anything is handed out
            self.held = True
            self.lane_stores.open()

    # -- the listener's calls -----------------------------------------------------------------

    def add(self, raws: list[Any], high_watermark: int | None, alone: bool = False) -> None:
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.high_watermark = high_watermark
            latency, tracing = self.context.latency, self.context.tracing
            if (latency is not None and latency.active) or (
                tracing is not None and tracing.enabled
            ):
                self.polls.fetched(raws[-1].offset())  # (sink spans start at the poll)
            if self.first_fetched is None:
                self.first_fetched = raws[0].offset()
            self.pending.extend(raws)
            if self.listener.quieted:
                self.held = True
            starts = self._hand_out()
            over_limit = len(self.pending) > self._high_water
        if over_limit:
            self.listener.over_limit(self)
        self._start(starts)

    def adopt_kept(self) -> int | None:
        return None  # lanes run no transaction: their writes are flushed as each batch ends

    def reached_eof(self) -> None:
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.eof = True
            now = self._eof_due()
        if now:
            self.listener.submit(self._run_eofed)

    def _dropped(self, seek: bool) -> None:
        self._drop_queues()
        if seek:  # what was handed out is read again from the seek's offset
            self.tracker.forget()
            self.collapse.forget()

    def tick(self) -> None:
        with self.lock:
            if self.scheduled or self.held or self.revoked or self.stopped or self.pending:
                return
            self.scheduled = self._ticking = True
        self.listener.submit(self._run_tick)

    def run(self) -> None:
        """Hand out what is pending and start the lanes that have work."""
        with self.lock:
            starts = self._hand_out()
        self._start(starts)

    def running_batches(self) -> list[tuple[int | None, RunningBatch]]:
        return [
            (lane.index, running) for lane in self.lanes if (running := lane.running) is not None
        ]

    def lane_states(self) -> list[LaneState]:
        """Each lane now (for ``app.snapshot()``)."""
        with self.lock:
            return [
                LaneState(lane.index, lane.handed_out, len(lane.queue), lane.running is not None)
                for lane in self.lanes
            ]

    def flush_idle(self) -> None:
        """Nothing is kept: stores and virtual partitions do not go together."""

    def side_work_due(self) -> None:
        """None comes: no store flush (see :meth:`flush_idle`), no joint transaction (lanes
        refuse transactions)."""

    def first_waiting(self) -> Any | None:
        with self.lock:
            outstanding = self.tracker.outstanding()
            return outstanding[0] if outstanding else self.pending.first()

    # -- handing out (under the lock) ---------------------------------------------------------

    def _hand_out(self) -> list[Lane]:
        """Move pending messages to their lanes (as far as the bound allows) and return the
        lanes to start, marked active. Called with the lock held."""
        if self.revoked or self.stopped or self.held or self._ticking:
            return []
        collapse = self.collapse
        if collapse.failure is not None:
            if self.active_lanes:
                return []  # the running lanes finish first
            self._collapse()
            if self.held:
                return []
        tracker = self.tracker
        collapsed_until = collapse.until
        first_lane = self.lanes[0]
        if collapsed_until is not None and not first_lane.active and not first_lane.queue:
            committable = tracker.committable()
            if committable is not None and committable > collapsed_until:
                collapse.until = collapsed_until = None
                self._later(ev.VIRTUAL_PARTITIONS_RESTORED, until=committable - 1)
        lanes = self.lanes
        room = self._in_flight_limit - len(tracker)
        if room > 0 and self.pending:
            taken = self.pending.take(room)
            assigner = self.assigner
            sizes = (
                [0] * len(lanes)
                if ev.VIRTUAL_PARTITIONS_DISTRIBUTED in self._subscribed()
                else None
            )
            for position, raw in enumerate(taken):
                offset = raw.offset()
                if collapsed_until is not None:
                    if offset > collapsed_until:
                        self.pending.put_back(taken[position:])
                        break
                    index = 0
                else:
                    try:
                        index = assigner.lane_of(raw)
                    except Exception as error:
                        self.pending.put_back(taken[position:])
                        self._partitioner_failed(offset, error)
                        break
                if not tracker.hand_out(offset, raw):
                    self.reports.arrived_twice(offset, tracker.last())
                    continue
                lane = lanes[index]
                if not lane.queue:
                    lane.since = time.monotonic()
                lane.queue.append(raw)
                lane.handed_out += 1
                if sizes is not None:
                    sizes[index] += 1
            if sizes is not None and any(sizes):
                self._later(ev.VIRTUAL_PARTITIONS_DISTRIBUTED, sizes=sizes, lanes=len(lanes))
            if len(self.pending) < self._low_water:
                self._after_lock.append(lambda: self.listener.drained(self))
                if self.backpressure:
                    self.backpressure = False
                    self._after_lock.append(
                        lambda: self.listener.resume(self.topic, self.partition)
                    )
        if collapse.failure is not None and not self.active_lanes:
            self._collapse()  # the partitioner failed with no lane running
            if self.held:
                return []
            return self._hand_out()  # the message it failed on, now collapsed
        starts = [lane for lane in lanes if lane.queue and not lane.active]
        if self.linger is not None and starts:
            starts = self.linger.ready_lanes(starts)
        if starts:
            if not self.active_lanes and self.route.long_running_job:
                self.listener.pause(self.topic, self.partition)
            for lane in starts:
                lane.active = True
            self.active_lanes += len(starts)
            self.scheduled = True
        return starts

    def _partitioner_failed(self, offset: int, error: Exception) -> None:
        self.reports.partitioner_failed(offset, error)
        self._later(
            ev.ERROR_OCCURRED,
            type="consumer.virtual_partitions.partitioner.error",
            error=error,
            offset=offset,
        )
        self.collapse.fail(Failure(0.0, offset, error))

    def _collapse(self) -> None:
        """Every lane stopped after a failure: queue what did not finish, in offset order, in
        lane 0, to run in strict order (after the back-off) through the last offset handed out."""
        failure, redo = self.collapse.begin(self.tracker, self.retry_finished_lanes)
        self._drop_queues()
        self.lanes[0].queue.extend(redo)
        self._later(
            ev.VIRTUAL_PARTITIONS_COLLAPSED,
            until=self.collapse.until,
            error=failure.error,
            delay=failure.delay,
        )
        if failure.delay > 0:
            self.held = True
            self._cancel_resume_timer()
            self._resume_timer = self._timers.call_later(failure.delay, self._release)

    def _drop_queues(self) -> None:
        for lane in self.lanes:
            lane.queue.clear()

    def _eof_due(self) -> bool:
        """With the lock held: whether the end of the partition was reached with nothing left."""
        if not self.eof or self.active_lanes or self.pending or self._ticking or queued(self.lanes):
            return False
        self.eof = False
        return True

    def _subscribed(self) -> frozenset[str]:
        return self.context.monitor.subscribed

    def _later(self, event: str, **payload: Any) -> None:
        """Emit ``event`` once the lock is let go (lock held)."""
        if event in self._subscribed():
            monitor = self.context.monitor
            topic, partition = self.topic, self.partition
            self._after_lock.append(
                lambda: monitor.instrument(event, topic=topic, partition=partition, **payload)
            )

    def _start(self, lanes: list[Lane]) -> None:
        """Without the lock: run what was queued under it, then start ``lanes``."""
        if self._after_lock:
            with self.lock:
                actions, self._after_lock = self._after_lock, []
            for action in actions:
                action()
        if self.asynchronous:
            for lane in lanes:
                self.listener.submit_coroutine(
                    self._run_lane_async(lane), f"{self.topic}/{self.partition} lane {lane.index}"
                )
            return
        submit = self.listener.submit
        for lane in lanes:
            submit(lane.run)

    # -- worker threads -----------------------------------------------------------------------

    def run_lane(self, lane: Lane) -> None:
        """A lane's job on the worker pool: its batches until its queue is empty."""
        self.listener.job_started()
        try:
            while (batch := self._take(lane)) is not None:
                payloads = None
                if self.route.deserializers.validates:
                    if (checked := self._checked(lane, batch)) is None:
                        continue
                    batch, payloads = checked
                consumer, extra = self._lane_started(lane, batch)
                try:
                    started = self.hooks.consume(
                        consumer, batch, lane.failed, lane.put_back, extra, payloads
                    )
                finally:
                    lane.running = None
                if started is not None and self._flushed(lane, batch, started):
                    self._lane_returned(lane, consumer, batch, started, extra)
        finally:
            self.listener.job_finished()

    async def _run_lane_async(self, lane: Lane) -> None:
        """A lane of an ``async def consume()``: the same, as a task on the app's event loop,
        where the partition's lanes (and other partitions') run concurrently."""
        self.listener.job_started()
        try:
            while (batch := self._take(lane)) is not None:
                payloads = None
                if self.route.deserializers.validates:
                    if (checked := self._checked(lane, batch)) is None:
                        continue
                    batch, payloads = checked
                consumer, extra = self._lane_started(lane, batch)
                try:
                    started = await self.hooks.consume_async(
                        consumer, batch, lane.failed, lane.put_back, extra, payloads
                    )
                finally:
                    lane.running = None
                if started is not None and self._flushed(lane, batch, started):
                    self._lane_returned(lane, consumer, batch, started, extra)
        finally:
            self.listener.job_finished()

    def _checked(self, lane: Lane, batch: list[Any]) -> tuple[list[Any], list[Any] | None] | None:
        """A typed route's lane batch against its models: the valid front to consume and its
        payloads (the rest waits in the lane); ``None`` when the first message does not fit,
        which the failure path then has (the DLQ at once, or retries)."""
        checked = check_models(batch, self.route.deserializers)
        error = checked.error
        if error is None:
            return batch, checked.payloads
        if checked.valid == 0:
            action = self.policy.at_once(error)
            if action is None or not self._give_up(batch[0], error, 1, action):
                lane.failed(batch, error, time.perf_counter())  # retries, in one lane
                return None
            self.reports.consume_failed(
                lane, batch[:1], error, attempt=1, action=action, collapsed=False, started=None
            )
        with self.lock:  # the rest waits in the lane (after the invalid one gave up: all of it)
            if not (self.revoked or self.stopped):
                lane.put_back(batch[checked.valid or 1 :])
        return (batch[: checked.valid], checked.payloads) if checked.valid else None

    def _take(self, lane: Lane) -> list[Any] | None:
        """The lane's next batch; ``None`` when it stops (then it is no longer active, and
        what its stop lets start has started)."""
        with self.lock:
            linger = self.linger
            if not (self.revoked or self.stopped or self.held or self.collapse.failure is not None):
                queue = lane.queue
                if queue and (linger is None or linger.ready(lane, time.monotonic())):
                    batch = [queue.popleft() for _ in range(min(self.max_messages, len(queue)))]
                    lane.since = time.monotonic()
                    return batch
            lane.active = False
            self.active_lanes -= 1
            if linger is not None and lane.queue:
                linger.ready_lanes([lane])  # not a full batch yet: a timer wakes it when due
            starts = self._lane_stopped()
            eofed = self._eof_due()
        self._start(starts)
        if eofed:  # on a worker: an async lane's loop cannot run another hook's loop
            self.listener.submit(self._run_eofed)
        return None

    def _lane_stopped(self) -> list[Lane]:
        """A lane has nothing more to run (lock held): start others, or let the partition go."""
        if self.active_lanes:
            return []
        starts = self._hand_out()
        if not self.active_lanes:
            self.scheduled = False
            if self.route.long_running_job and not self.revoked:
                self.listener.resume(self.topic, self.partition)
            successor, self.successor = self.successor, None
            if successor is not None:
                successor._release()
            if self.revoked or self.stopped:
                self.close_stores()  # the files stay; a successor reopens them
        return starts

    def new_consumer(self, lane: Lane) -> Consumer:
        """A consumer instance for ``lane``; the partition's own (for the listener and the
        snapshot) is the first one made."""
        assert self.route.consumer_class is not None
        consumer = self.route.consumer_class()
        consumer.topic = self.topic
        consumer.partition = self.partition
        consumer.route = self.route
        consumer.virtual_partition = lane.index
        attach_partition_handle(consumer, lane)  # the lane stands in for its partition
        self.context.prepare_consumer(consumer)
        if self.consumer is None:
            self.consumer = consumer  # the one the listener and the snapshot look at
        return consumer

    def _instance(self) -> Consumer:
        return self.lanes[0].instance()

    def _lane_started(self, lane: Lane, batch: list[Any]) -> tuple[Consumer, dict[str, Any]]:
        consumer = lane.instance()
        lane.batch = batch
        lane.abort = False
        lane.running = RunningBatch(batch)
        return consumer, {"virtual_partition": lane.index}

    # -- state stores (see LaneStores) --------------------------------------------------------

    def lane_views(self, lane: Lane) -> Mapping[str, State]:
        return {} if self.lane_stores is None else self.lane_stores.views(lane)

    def release(self) -> None:
        """The stores are open: hand out what waits (:class:`LaneStores`)."""
        self._release()

    @property
    def timers(self) -> Timers:
        return self._timers

    def _flushed(self, lane: Lane, batch: list[Any], started: float) -> bool:
        return self.lane_stores is None or self.lane_stores.flushed(lane, batch, started)

    def _lane_returned(
        self,
        lane: Lane,
        consumer: Consumer,
        batch: list[Any],
        started: float,
        extra: dict[str, Any],
    ) -> None:
        manual = self.route.manual_offset_management
        with self.lock:
            if self.collapse.failure is None:
                self.attempt = 0
            if not lane.abort and not manual:
                self._finish_locked([raw.offset() for raw in batch])
            starts = self._hand_out()
        self._start(starts)
        self.hooks.consumed(consumer, batch, started, extra)

    # -- offsets --------------------------------------------------------------------------------

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        """The message before ``next_offset`` finished (the failure policy marks a message it
        dispatched or skipped this way): it alone, not the messages before it."""
        if metadata is not None and not self.revoked:
            self.metadata.mark(next_offset, metadata)
        return self.finish([next_offset - 1], sync)

    def finish(self, offsets: list[int], sync: bool) -> bool:
        """``offsets`` finished; with ``sync``, commit the partition's committable offset now.
        Returns False when the partition was revoked (or the commit failed)."""
        if self.revoked:
            return False
        with self.lock:
            self._finish_locked(offsets)
            starts = self._hand_out()
        self._start(starts)
        if not sync:
            return not self.revoked
        target = self._fence(self.marked)  # (takes the lock itself)
        if target is None:
            return not self.revoked
        return self._commit_now(target) and not self.revoked

    def _finish_locked(self, offsets: list[int]) -> None:
        tracker = self.tracker
        for offset in offsets:
            tracker.finish(offset)
        committable = tracker.committable()
        if committable is not None and (self.marked is None or committable > self.marked):
            self.marked = committable
            self.polls.forget_before(committable)

    # -- failures -------------------------------------------------------------------------------

    def lane_failed(self, lane: Lane, batch: list[Any], error: Exception, started: float) -> None:
        """``lane``'s ``consume()`` of ``batch`` raised ``error``: collapsed already, the lane
        retries it after the back-off (or gives the first message up); else the partition
        collapses once its running lanes finish."""
        if self.lane_stores is not None:
            self.lane_stores.discard(lane)  # what the failed batch wrote is gone with it
        marked = self.marked
        verdict = self.policy.failed(
            error, self.attempt, progressed=marked is not None and marked > self._marked_at_failure
        )
        self._marked_at_failure = marked if marked is not None else -1
        self.attempt = verdict.attempt
        with self.lock:
            tracker = self.tracker
            retry = [raw for raw in batch if not tracker.is_finished(raw.offset())]
            collapsed = self.collapse.until is not None
        reports = self.reports
        reports.consume_failed(
            lane,
            batch,
            error,
            attempt=verdict.attempt,
            action=verdict.action,
            collapsed=collapsed,
            started=started,
        )
        given_up = False
        if verdict.action != RETRY and retry:
            given_up = self._give_up(retry[0], error, verdict.attempt, verdict.action)
        if collapsed:
            # One lane in strict order: as a partition without lanes.
            with self.lock:
                if self.revoked or self.stopped:
                    return
                if given_up:
                    lane.queue.extendleft(reversed(retry[1:]))
                    return
                lane.queue.extendleft(reversed(retry))
                self.held = True
                self._cancel_resume_timer()
                self._resume_timer = self._timers.call_later(verdict.delay, self._release)
            reports.retrying(batch, verdict.attempt, verdict.delay, error)
            return
        delay = 0.0 if given_up else verdict.delay
        reports.collapsing(lane, batch, verdict.attempt, delay, error)
        with self.lock:
            if not (self.revoked or self.stopped):
                self.collapse.fail(Failure(delay, batch[-1].offset(), error))

    def _give_up(self, raw: Any, error: Exception, attempts: int, action: str) -> bool:
        """Dispatch or skip ``raw`` as the policy says; False when that failed (it stays in
        the retry path)."""
        self.reports.giving_up(raw.offset(), attempts, action, error)
        try:
            self.policy.give_up(
                Message(raw, self.route.deserializers), error, attempts, action, self
            )
        except Exception as dispatch_error:
            self._report_dispatch_failure(raw.offset(), dispatch_error)
            return False
        self.attempt = 0
        return True

    def _release(self) -> None:
        with self.lock:
            self._resume_timer = None
            if not self.held:
                return
            self.held = False
            starts = self._hand_out()
        self._start(starts)

    # -- the consumer's requests ----------------------------------------------------------------

    def request_seek(self, offset: int) -> None:
        with self.lock:
            self.pending.clear()
            self._drop_queues()
        self.listener.seek(self, offset)

    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        with self.lock:
            self.held = True
            if offset is None:
                outstanding = self.tracker.outstanding()
                waiting = outstanding[0] if outstanding else self.pending.first()
                offset = (
                    self.tracker.committable()
                    if outstanding
                    else (waiting.offset() if waiting is not None else self.marked)
                )
            self.pending.clear()
            self._drop_queues()
        self.listener.pause(self.topic, self.partition)
        if offset is not None:
            self.listener.seek(self, offset)
        if timeout is not None:
            with self.lock:
                self._cancel_resume_timer()
                self._resume_timer = self._timers.call_later(timeout, self.request_resume)

    # -- hooks on every lane's consumer ---------------------------------------------------------

    def _call(self, hook: str, event: str) -> None:
        for lane in self.lanes:
            if lane.consumer is not None:
                self.hooks.call(lane.consumer, hook, event)

    @property
    def collapsed(self) -> bool:
        """Whether the partition runs in one lane, in strict order, after a failure."""
        return self.collapse.until is not None

    def _run_tick(self) -> None:
        self.listener.job_started()
        try:
            _ = self.consumer or self._instance()  # idle since assigned: lane 0's consumer ticks
            self._call("tick", ev.CONSUMER_TICKED)
        finally:
            with self.lock:
                self._ticking = False
                self.scheduled = self.active_lanes > 0
                starts = self._hand_out()
                if not self.scheduled:  # revoked during the tick and assigned again
                    successor, self.successor = self.successor, None
                    if successor is not None:
                        successor._release()
            self._start(starts)
            self.listener.job_finished()

    def _run_eofed(self) -> None:
        self.listener.job_started()
        try:
            self._call("reached_end", ev.CONSUMER_EOFED)
        finally:
            self.listener.job_finished()
