"""One topic-partition's processing: its pending messages, its consumer instance, its offsets.

The listener adds fetched messages; at most one job per partition runs on the worker pool
at a time and takes batches of up to ``max_messages`` until nothing is pending, so order
within the partition holds while partitions run in parallel. After ``consume()`` returns,
the batch's last offset is marked for the listener's next commit (on a route with state
stores, with the flush of their writes: :mod:`conveyor.processing.store_flush`); if it
raises, the topic's :class:`~conveyor.processing.strategies.FailurePolicy` says whether the
batch is retried after a pause (from its first unmarked message) or that message is
dispatched or skipped.

The executor is the only writer of its partition's state (under its lock). What it needs
from librdkafka (pause, resume, seek, a synchronous commit, the group's metadata) it asks of
its listener by name (:class:`ListenerActions`); those run on the listener's thread.

What it shares with the executor of virtual partitions (the partition's state, commits and
their fence, what a consumer asks of its partition) is their
:class:`~conveyor.processing.partition_core.PartitionCore`; this module is how batches run in
order on one consumer: the job, inline quick batches, filters and the failure path.
"""

from __future__ import annotations

import inspect
import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from conveyor.consumer import attach_partition_handle
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import Message
from conveyor.processing.filters import Filtered, apply_filters, report_filtered
from conveyor.processing.model_check import check_models
from conveyor.processing.partition_core import PartitionCore, RunningBatch
from conveyor.processing.snapshot import LaneState
from conveyor.processing.store_flush import StoreFlush

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.listener_actions import ListenerActions
    from conveyor.processing.strategies import FailurePolicy
    from conveyor.processing.timers import Timers
    from conveyor.routing.topic import Topic
    from conveyor.state.partition_stores import PartitionStores

__all__ = ["PartitionExecutor", "RunningBatch"]

_log = logging.getLogger("conveyor.processing")
_gave_up = RateLimitedLog(_log)  # a run of poison messages is one line per interval

# A small batch runs on the listener's own thread, saving the hand-off to a worker (a thread
# wake-up and a GIL hand-over: ~45 us of a lone message's ~0.3 ms on 2 cores), once the
# partition's last _QUICK_STREAK jobs each took under _QUICK_JOB seconds. One slower job sends
# the partition back to the pool until it has been quick again that many times. Time spent
# on a sampled trace's spans is the tracer's, not the consumer's: it is left out of the
# measure, so that one message in a hundred being traced does not send the next 8 to the pool.
_QUICK_JOB = 0.000_25
_QUICK_STREAK = 8
_INLINE_MAX = 16


class PartitionExecutor(PartitionCore):
    """Processing state of one assigned topic-partition in one listener, its messages run in
    order on one consumer instance (see the module)."""

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
        super().__init__(listener, route, partition, context, policy, timers, topic)
        self._inline_max = min(_INLINE_MAX, self.max_messages)
        self._filter_held = False  # a route filter made the partition wait (until its timer)
        self.running: RunningBatch | None = None
        self._abort_batch = False
        consumer_class = route.consumer_class
        self.inline = (
            context.settings.inline_quick_batches
            and not route.long_running_job
            and consumer_class is not None
            and not inspect.iscoroutinefunction(consumer_class.consume)
        )
        """Whether small batches may run on the listener's thread (see ``_QUICK_JOB``)."""
        self._quick_jobs = 0  # the partition's jobs in a row that took under _QUICK_JOB
        self._told_over_limit = False  # told the listener it passed the high-water mark
        self._restoring = False  # its stores are on the restore thread
        self._paused_for_restore = False  # fetching paused while they are
        self._restore_failures = 0
        self._flushes = (  # batches whose store writes wait for the next flush
            None
            if self.stores is None
            else StoreFlush(self, self.stores, context.settings.state_flush_interval, timers)
        )
        if self.stores is not None:  # restored from assignment on: ready when messages come
            self.held = True
            self._restoring = True
            space = context.stores
            assert space is not None
            space.restorer.submit(self.stores, self._restored)

    # -- called by the listener (its thread) --------------------------------------------------

    def add(self, raws: list[Any], high_watermark: int | None, alone: bool = False) -> None:
        """Messages fetched for this partition, in order, and the partition's high watermark.

        ``alone``: they are all the listener's poll brought; when they are few and this
        partition's jobs have been quick, they run here, on the listener's thread."""
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.high_watermark = high_watermark
            latency = self.context.latency
            if latency is not None and latency.active:
                self.polls.fetched(raws[-1].offset())
            if self.first_fetched is None:
                self.first_fetched = raws[0].offset()
            if self.listener.quieted:
                self.held = True
            start = not self.scheduled and not self.held
            if start:
                self.scheduled = True
            pending = self.pending
            here = start and alone and self._quick_jobs >= _QUICK_STREAK and self.inline
            # Nothing else waits: the batch is ``raws`` itself, no need to pass the backlog.
            direct = here and not pending.size and not self.eof and len(raws) <= self._inline_max
            if not direct:
                pending.extend(raws)
                size = pending.size
                if size > self._high_water and not self._told_over_limit:
                    # Told under the lock, so that a worker's drained() cannot come before it.
                    self._told_over_limit = True
                    self.listener.over_limit(self)
                here = here and size <= _INLINE_MAX
        if here:  # the batch is raws itself (direct), or taken from the backlog
            self.listener.run_here(partial(self._job, raws if direct else None))
        elif start:
            self.listener.submit(self.run)

    def reached_eof(self) -> None:
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.eof = True
            start = not self.scheduled and not self.held
            if start:
                self.scheduled = True
        if start:
            self.listener.submit(self.run)

    def _dropped(self, seek: bool) -> None:
        """Nothing but ``pending`` holds fetched messages here."""

    def tick(self) -> None:
        """Run the consumer's ``tick()`` if the partition is idle."""
        with self.lock:
            if self.scheduled or self.held or self.revoked or self.stopped or self.pending:
                return
            self.scheduled = True
        self.listener.submit(self._run_tick)

    def running_batches(self) -> list[tuple[int | None, RunningBatch]]:
        """The batches running now, each with its lane (``None`` without virtual partitions)."""
        running = self.running
        return [] if running is None else [(None, running)]

    def lane_states(self) -> list[LaneState]:
        """Its virtual partitions now (none without them)."""
        return []

    @property
    def collapsed(self) -> bool:
        """Whether its virtual partitions run in one lane after a failure (never without them)."""
        return False

    def first_waiting(self) -> Any | None:
        """The first message fetched and not processed yet, the running batch's first included
        (``None``: none)."""
        running = self.running
        if running is not None:
            return running.first
        with self.lock:
            return self.pending.first()

    # -- worker threads -----------------------------------------------------------------------

    def run(self) -> None:
        """The job: process batches until nothing is pending (or the partition is held)."""
        self._job(None)

    def _job(self, first: list[Any] | None) -> None:
        """:meth:`run`, starting with ``first`` (a batch taken by no backlog) when given."""
        listener = self.listener
        listener.job_started()
        hooks = self.hooks
        hooks.tracing_time = 0.0
        began = time.perf_counter()
        long_running = self.route.long_running_job
        if long_running:  # fetch nothing behind a long job; the listener keeps polling
            listener.pause(self.topic, self.partition)
        try:
            if first is not None:
                self._process(first)
            while True:
                resume_fetching = drained = False
                with self.lock:
                    pending = self.pending
                    ending = (
                        self.revoked or self.stopped or self.held or not (pending.size or self.eof)
                    )
                    # the job ends: what its batches wrote is flushed first (or by a timer); a
                    # rebuild asked runs between two batches
                    flush = (ending and self._flush_at_end()) or self._rebuild_asked is not None
                    if ending and not flush:
                        self.scheduled = False
                        successor, self.successor = self.successor, None
                        if successor is not None:
                            successor._release()
                        if self.revoked or self.stopped:
                            self.close_stores()  # the files stay; a successor reopens them
                        return
                    if not flush:
                        batch = pending.take(self.max_messages)
                        eof = self.eof and not pending.size
                        if eof:
                            self.eof = False
                        drained = self._told_over_limit and pending.size < self._low_water
                        if drained:
                            self._told_over_limit = False
                        if self.backpressure and pending.size < self._low_water:
                            self.backpressure = False
                            resume_fetching = True
                if flush:
                    self._end_work()
                    continue
                if drained:
                    listener.drained(self)
                if resume_fetching:
                    listener.resume(self.topic, self.partition)
                if batch:
                    self._process(batch)
                    eof = eof and self._end_still_reached(batch[-1].offset())
                if eof:
                    self._call("reached_end", ev.CONSUMER_EOFED)
        finally:
            if long_running and not self.revoked and not self._filter_held:
                listener.resume(self.topic, self.partition)
            # One job of this partition runs at a time: only that job writes the count.
            quick = time.perf_counter() - began - hooks.tracing_time < _QUICK_JOB
            self._quick_jobs = self._quick_jobs + 1 if quick else 0
            listener.job_finished()

    def _end_still_reached(self, last: int) -> bool:
        """After a batch taken at the end of the partition: False when a tail of it (through
        offset ``last``) went back to wait (a filter's hold, a retry, an invalid message). The
        end is then reached once that tail is processed, not now."""
        with self.lock:
            waiting = self.pending.first()
            if waiting is None or waiting.offset() > last:
                return True
            self.eof = True
            return False

    def _run_tick(self) -> None:
        self.listener.job_started()
        try:  # a partition idle since its assignment meets its consumer here
            ticked = self.hooks.call(self._instance(), "tick", ev.CONSUMER_TICKED)
            flushes = self._flushes
            if flushes is not None and not (ticked and self.handed_to_joint()):  # (else its commit)
                flushes.after_tick(ticked)
        finally:
            self._side_job_ended()

    def flush_due(self) -> None:
        """On the timers' thread: the flush interval is over for the writes a job kept as it
        ended; a job of their own flushes them (a running job does at its next batch's end)."""
        flushes = self._flushes
        assert flushes is not None
        with self.lock:
            flushes.timer_ran()
        self.side_work_due()

    def side_work_due(self) -> None:
        with self.lock:
            if self.scheduled or self.revoked or self.stopped:
                return
            self.scheduled = True
        self.listener.submit(self._run_side_work)

    def _run_side_work(self) -> None:
        self.listener.job_started()
        try:
            self._end_work()
        finally:
            self._side_job_ended()

    def _end_work(self) -> None:
        """What a job does before it ends: a rewind an aborted joint transaction left, else
        the flush of the store writes kept."""
        if not self._take_rewind() and self._kept_writes() and not self.revoked:
            self._flush_kept()
        self._take_rebuild()

    def _side_job_ended(self) -> None:
        """A tick or a flush ran as the partition's job: what was fetched meanwhile runs now;
        a partition revoked meanwhile and assigned again lets its new executor start."""
        with self.lock:
            self.scheduled = False
            restart = bool(self.pending) and not self.held and not self.revoked and not self.stopped
            if restart:
                self.scheduled = True
            else:
                successor, self.successor = self.successor, None
                if successor is not None:
                    successor._release()
        if restart:
            self.listener.submit(self.run)
        self.listener.job_finished()

    def _instance(self) -> Consumer:
        consumer = self.consumer
        if consumer is None:
            assert self.route.consumer_class is not None
            consumer = self.route.consumer_class()
            consumer.topic = self.topic
            consumer.partition = self.partition
            consumer.route = self.route
            attach_partition_handle(consumer, self)
            self.context.prepare_consumer(consumer)
            self.consumer = consumer
        return consumer

    def _process(self, batch: list[Any]) -> None:
        stores = self.stores
        if stores is not None and not stores.opened:
            self._restore_first(stores, batch)
            return
        payloads = None
        if self.route.deserializers.validates:  # before the filters: they may read payloads
            checked = check_models(batch, self.route.deserializers)
            if checked.error is not None:
                if checked.valid == 0:  # the failure path: the DLQ at once, or retries
                    self._failed(batch, checked.error, time.perf_counter())
                    return
                with self.lock:  # the invalid one heads the next run, after these
                    if not (self.revoked or self.stopped):
                        self.pending.put_back(batch[checked.valid :])
                batch = batch[: checked.valid]
            payloads = checked.payloads
        first, through = batch[0].offset(), batch[-1].offset() + 1
        hold: tuple[Any, str, float] | None = None
        if self.route.filters:
            try:
                filtered = self._filter(batch)
            except Exception as exc:  # a filter's failure is the batch's: retry, DLQ, ...
                self._failed(batch, exc, time.perf_counter())
                return
            if payloads is not None and len(filtered.keep) != len(batch):
                by_offset = {raw.offset(): p for raw, p in zip(batch, payloads, strict=True)}
                payloads = [by_offset[raw.offset()] for raw in filtered.keep]
            batch, through, hold = filtered.keep, filtered.through, filtered.hold
            if not batch:  # all dropped (marked as consumed) or waiting
                if through > first and not self.route.manual_offset_management:
                    self.mark(through, sync=False)
                if hold is not None:
                    self._hold(hold[2])
                return
        consumer = self.consumer
        if consumer is None:
            consumer = self._instance()
        self.running = RunningBatch(batch)
        self._abort_batch = self.rewound = False
        try:
            started = self.hooks.consume(
                consumer, batch, self._failed, self.pending.put_back, payloads=payloads
            )
        finally:
            self.running = None
        if started is None:
            return
        deferred = self.handed_to_joint()  # its commit writes them and marks
        if stores is not None and not deferred:
            flushes = self._flushes
            assert flushes is not None
            deferred = (
                not self.route.manual_offset_management
                and not self.revoked
                and not self._abort_batch
                and flushes.defer(first, through)
            )
            if not deferred and not self._flushed(stores, batch, started):
                return
        self.attempt = 0
        if not deferred and not self._abort_batch and not self.route.manual_offset_management:
            self.mark(through, sync=False)
        self.hooks.consumed(consumer, batch, started)
        if hold is not None and not self._abort_batch:
            self._hold(hold[2])

    def adopt_kept(self) -> int | None:
        return None if self._flushes is None else self._flushes.adopt()

    def _kept_writes(self) -> bool:
        """Whether batches' store writes (and offsets) wait for a flush."""
        return self._flushes is not None and self._flushes.waiting

    def _flush_kept(self) -> bool:
        assert self._flushes is not None
        return self._flushes.flush()

    def _flush_at_end(self) -> bool:
        """Under the lock, as the job ends: whether the writes kept are flushed now (else a
        timer asks for it when the flush interval is over)."""
        flushes = self._flushes
        return self._rewind_asked or (
            flushes is not None
            and flushes.waiting
            and not self.revoked
            and flushes.at_job_end(self.held or self.stopped)
        )

    def flush_idle(self) -> None:
        if self.joint_seat is not None:
            self.joint_seat.settle()
        flushes = self._flushes
        with self.lock:
            if flushes is None or self.scheduled or self.revoked or not flushes.waiting:
                return
            self.scheduled = True
        try:
            flushes.flush(again=False)
        finally:
            with self.lock:
                self.scheduled = False

    def _restore_first(self, stores: PartitionStores, batch: list[Any]) -> None:
        """The partition's stores are not open: its batch waits and its fetching pauses while
        the restore thread opens them (restored from their changelogs); this worker goes on
        with other partitions."""
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.pending.put_back(batch)
            self.held = True
            if self._restoring:
                return
            self._restoring = True
            self._paused_for_restore = True
        self.listener.pause(self.topic, self.partition)
        space = self.context.stores
        assert space is not None
        space.restorer.submit(stores, self._restored)

    def _restored(self, error: BaseException | None) -> None:
        """On the restore thread: the stores are open (the batch runs now), or ``error``
        (logged; the restore runs again after the route's back-off)."""
        with self.lock:
            self._restoring = False
            self._restore_failures = self._restore_failures + 1 if error else 0
            if self.revoked or self.stopped:
                return
            paused, self._paused_for_restore = self._paused_for_restore, False
        if paused:
            self.listener.resume(self.topic, self.partition)
        if error is None and self.waits_for_predecessor():
            return  # the predecessor's last batch releases this partition as it ends
        if error is not None:
            delay = self.policy.backoff.delay(self._restore_failures)
            _log.error(
                "%s/%s: its stores could not be opened; trying again in %.1f s: %r",
                *(self.topic, self.partition, delay, error),
            )
            with self.lock:
                self._cancel_resume_timer()
                self._resume_timer = self._timers.call_later(delay, self._release)
            return
        self._release()

    def _flushed(self, stores: PartitionStores, batch: list[Any], started: float) -> bool:
        """The batch's store writes, to the changelogs and then the stores, before its offset
        is marked: False when that failed (the batch failed: it runs again). A batch whose
        partition was revoked meanwhile writes nothing: its next owner runs it again."""
        if self.revoked or self._abort_batch:
            stores.discard()
            return True
        failure = self._write_stores(stores)
        if failure is not None:
            self._failed(batch, failure, started)
        return failure is None

    def _write_stores(self, stores: PartitionStores) -> Exception | None:
        """The stores' writes, to their changelogs and then the stores; what failed (the
        writes dropped then), or ``None``."""
        try:
            stores.flush(self.producer())
        except Exception as exc:
            stores.discard()
            return exc
        return None

    def _filter(self, batch: list[Any]) -> Filtered:
        """The route's filters over ``batch``: what they drop is reported (and marked with the
        rest), what they hold goes back to the backlog to wait."""
        filtered = apply_filters(self.route.filters, batch, self.route.deserializers, time.time())
        report_filtered(filtered, self.context.monitor, self.topic, self.partition)
        if filtered.held:
            with self.lock:
                if not (self.revoked or self.stopped):
                    self.pending.put_back(filtered.held)
        return filtered

    def _hold(self, seconds: float) -> None:
        """A filter made the partition wait: fetch nothing, and run what waits (the backlog)
        again ``seconds`` from now (a timer; nothing polls meanwhile)."""
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.held = True
            self._filter_held = True
            self._cancel_resume_timer()
        self.listener.pause(self.topic, self.partition)  # queued before the timer's resume
        with self.lock:
            if self._filter_held and not (self.revoked or self.stopped):
                self._resume_timer = self._timers.call_later(seconds, self._end_hold)

    def _end_hold(self) -> None:
        """A filter's wait is over: resume, unless someone paused the partition meanwhile."""
        with self.lock:
            if not self._filter_held:
                return
            self._filter_held = False
        if not self.listener.quieted:
            self.request_resume()

    def _failed(self, batch: list[Any], exc: Exception, started: float) -> None:
        self.running = None
        if self.stores is not None:
            self.stores.discard()  # what the failed batch wrote is gone with it
            if self._kept_writes() and not self._flush_kept():
                return  # the batches before it run again, and it with them
        if self.rewound:  # aborted with the batches before it in a joint transaction: the same
            self.rewound = False
            return
        marked = self.marked
        first_unmarked = marked if marked is not None else batch[0].offset()
        verdict = self.policy.failed(
            exc, self.attempt, progressed=marked is not None and marked > self._marked_at_failure
        )
        self._marked_at_failure = marked if marked is not None else -1
        self.attempt = verdict.attempt
        retry = [raw for raw in batch if raw.offset() >= first_unmarked]
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="consumer.consume.error",
                error=exc,
                consumer=self.consumer,
                topic=self.topic,
                partition=self.partition,
                first_offset=batch[0].offset(),
                last_offset=batch[-1].offset(),
                attempt=verdict.attempt,
                action=verdict.action,
                duration=time.perf_counter() - started,
            )
        if verdict.action != "retry" and retry:
            _gave_up.log(
                logging.ERROR,
                f"{self.topic}/{self.partition}",
                "%s/%s: consume raised at offset %s (attempt %s); %s: %r",
                self.topic,
                self.partition,
                retry[0].offset(),
                verdict.attempt,
                "moving it to the dead letter queue"
                if verdict.action == "dispatch"
                else "skipping it",
                exc,
            )
            try:
                self.policy.give_up(
                    Message(retry[0], self.route.deserializers),
                    exc,
                    verdict.attempt,
                    verdict.action,
                    self,
                )
            except Exception as dispatch_error:
                # Not sent (or not committed with its offset): the message stays in the retry
                # path, and the next failure after the back-off dispatches it again.
                self._report_dispatch_failure(retry[0].offset(), dispatch_error)
            else:
                self.attempt = 0
                with self.lock:
                    if not (self.revoked or self.stopped):
                        self.pending.put_back(retry[1:])
                return
        _log.error(
            "%s/%s: consume raised on offsets %s-%s (attempt %s); retrying in %.1f s: %r",
            self.topic,
            self.partition,
            batch[0].offset(),
            batch[-1].offset(),
            verdict.attempt,
            verdict.delay,
            exc,
        )
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.pending.put_back(retry)
            self.held = True
            self._cancel_resume_timer()
            self._resume_timer = self._timers.call_later(verdict.delay, self._release)

    def _release(self) -> None:
        with self.lock:
            self._resume_timer = None
            if not self.held:
                return
            self.held = False
            start = (
                not self.scheduled
                and not self.revoked
                and not self.stopped
                and bool(self.pending or self.eof)
            )
            if start:
                self.scheduled = True
        if start:
            self.listener.submit(self.run)

    def _call(self, hook: str, event: str) -> None:
        if self.consumer is not None:
            self.hooks.call(self.consumer, hook, event)

    # -- asked by the consumer (on its worker) and by the failure policy ----------------------

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        """Remember ``next_offset`` as processed, with ``metadata`` for its commit; the
        listener commits it (now, with ``sync``).

        librdkafka's consumer is only touched on the listener's thread: a worker calling it
        while the listener polls can wait for that poll (and the next) to let go."""
        if self.revoked:
            return False
        if self._kept_writes() and not self._flush_kept():
            return False  # a later offset is never marked before earlier batches' writes
        if metadata is not None:
            self.metadata.mark(next_offset, metadata)  # before the offset: a commit sees both
            if self.transactional:  # the transaction that marks it committed it, with it
                self.metadata.at(next_offset)
        if self.marked is None or next_offset > self.marked:
            self.marked = next_offset
        if not sync or self.transactional:  # a transaction commits it
            return not self.revoked
        target = self._fence(next_offset)
        assert target is not None
        committed = self._commit_now(target)
        return committed and target == next_offset and not self.revoked

    def request_seek(self, offset: int) -> None:
        with self.lock:
            self.pending.clear()
            self._abort_batch = True
        self.listener.seek(self, offset)

    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        with self.lock:
            self.held = True
            self._filter_held = False  # the user's pause wins over a filter's wait
            waiting = self.pending.first()
            first = waiting.offset() if waiting is not None else None
            self.pending.clear()
            self._abort_batch = True
        if offset is None:
            current = self.consumer.messages if self.consumer is not None else None
            offset = (
                self.marked
                if self.marked is not None
                else (current[0].offset if current else first)
            )
        self.listener.pause(self.topic, self.partition)
        if offset is not None:
            self.listener.seek(self, offset)
        if timeout is not None:
            with self.lock:
                self._cancel_resume_timer()
                self._resume_timer = self._timers.call_later(timeout, self.request_resume)
