"""One topic-partition's processing: its pending messages, its consumer instance, its offsets.

The listener adds fetched messages; at most one job per partition runs on the worker pool
at a time and takes batches of up to ``max_messages`` until nothing is pending, so order
within the partition holds while partitions run in parallel. After ``consume()`` returns,
the batch's last offset is marked for the listener's next commit; if it raises, the topic's
:class:`~conveyor.processing.strategies.FailurePolicy` says whether the batch is retried
after a pause (from its first unmarked message) or that message is dispatched or skipped.

The executor is the only writer of its partition's state (under its lock). What it needs
from librdkafka (pause, resume, seek, a synchronous commit, the group's metadata) it asks of
its listener by name (:class:`ListenerActions`); those run on the listener's thread.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import Message
from conveyor.processing.backlog import Backlog
from conveyor.processing.filters import Filtered, apply_filters
from conveyor.processing.held_copies import HeldCopies
from conveyor.processing.hook_runs import ConsumeRuns
from conveyor.processing.snapshot import LaneState
from conveyor.tracing.latency import PollTimes

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.listener_actions import ListenerActions
    from conveyor.processing.strategies import FailurePolicy
    from conveyor.processing.timers import Timer, Timers
    from conveyor.producer import Producer
    from conveyor.routing.topic import Topic
    from conveyor.tracing.tracer import Tracing

__all__ = ["PartitionExecutor", "RunningBatch"]

_log = logging.getLogger("conveyor.processing")
_gave_up = RateLimitedLog(_log)  # a run of poison messages is one line per interval
_copy_failed = RateLimitedLog(_log)

# A small batch runs on the listener's own thread, saving the hand-off to a worker (a thread
# wake-up and a GIL hand-over: ~45 us of a lone message's ~0.3 ms on 2 cores), once the
# partition's last _QUICK_STREAK jobs each took under _QUICK_JOB seconds. One slower job sends
# the partition back to the pool until it has been quick again that many times.
_QUICK_JOB = 0.000_25
_QUICK_STREAK = 8
_INLINE_MAX = 16


class RunningBatch:
    """The batch a worker runs now: its offsets and when it started (wall clock)."""

    __slots__ = ("count", "first_offset", "last_offset", "started_at")

    def __init__(self, first_offset: int, last_offset: int, count: int) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.count = count
        self.started_at = time.time()


class PartitionExecutor(ConsumeRuns):
    """Processing state of one assigned topic-partition in one listener."""

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
        self.listener = listener
        self.route = route
        self.topic = topic or route.name  # a pattern route serves topics of other names
        self.partition = partition
        self.context = context
        self.policy = policy
        self._timers = timers
        self.max_messages = route.max_messages or context.settings.max_messages
        self._inline_max = min(_INLINE_MAX, self.max_messages)
        self._high_water = max(self.max_messages * 10, 2_000)
        self._low_water = self._high_water // 4
        self.pending = Backlog()
        self.lock = threading.Lock()
        self.scheduled = False  # a job is queued or running
        self.revoked = False
        self.stopped = False
        self.held = False  # paused by the user, quieted, or waiting out an error
        self.backpressure = False  # fetching paused in librdkafka while too much is pending
        self.eof = False
        self.marked: int | None = None  # the next offset to read, as last marked
        self.transactional = False  # offsets committed by consume-transform-produce transactions
        self._filter_held = False  # a route filter made the partition wait (until its timer)
        self.high_watermark: int | None = None  # as of the latest fetch
        self.first_fetched: int | None = None  # where this process started reading
        self.attempt = 0  # failed attempts of the current batch so far
        self.running: RunningBatch | None = None
        self._marked_at_failure = -1
        self.consumer: Consumer | None = None
        # Set when this partition was revoked while a batch ran and then assigned again: the
        # new executor starts only once this one's last batch is over (order per partition).
        self.successor: PartitionExecutor | None = None
        self._resume_timer: Timer | None = None
        self._abort_batch = False
        self.copies = HeldCopies(
            self.lock, self.topic, partition, lambda: self.revoked or self.stopped,
            policy.backoff.delay, timers, context.monitor,
        )  # fmt: skip
        """Copies sent at least once (dead letters, pipes, replies) not acknowledged yet."""
        self.polls = PollTimes()  # when each fetch came, while latency is measured
        self.last_timestamp: float | None = None  # of the last processed message (s), for lag
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

    def revoke(self) -> None:
        """The partition was taken away: drop what is pending; ``revoked()`` runs on a worker."""
        with self.lock:
            self.revoked = True
            self.pending.clear()
            self._cancel_resume_timer()
            self._dropped(seek=False)
        latency = self.context.latency
        if latency is not None:
            latency.forget(self.topic, self.partition)
        if self.consumer is not None and not self.stopped:
            self.listener.submit(self._run_revoked)

    def hold(self) -> None:
        """Take no new batch (quiet); what runs finishes, what is pending stays."""
        with self.lock:
            self.held = True

    def stop(self) -> None:
        """The app stops: drop what is pending and start nothing more."""
        with self.lock:
            self.stopped = True
            self.pending.clear()
            self._cancel_resume_timer()
            self._dropped(seek=False)

    def throttle(self) -> bool:
        """Too much is pending and the workers are slow: returns True when the listener should
        now pause fetching this partition (it resumes once the backlog drained)."""
        with self.lock:
            if self.backpressure or self.revoked:
                return False
            self.backpressure = True
            return True

    def discard_pending(self) -> None:
        """A seek is done: what was fetched before it is stale."""
        with self.lock:
            self.pending.clear()
            self.polls.clear()
            self._dropped(seek=True)

    def _dropped(self, seek: bool) -> None:
        """With the lock held, in the same section that cleared ``pending``: drop what else
        holds fetched messages (virtual partitions' lanes); ``seek``: they will be read again."""

    def committable(self) -> int | None:
        """The offset to commit for this partition (``None``: nothing marked, revoked, or its
        offsets go through transactions): the marked one, or the lowest offset whose copy is
        not acknowledged yet, if lower."""
        if self.revoked or self.transactional:
            return None
        return self._fence(self.marked)

    def _fence(self, offset: int | None) -> int | None:
        return self.copies.fence(offset)

    def wait_for_copies(self, deadline: float) -> bool:
        """Block until no copy sent for this partition awaits its acknowledgement (or the
        monotonic ``deadline``); True when none does."""
        return self.copies.wait(deadline)

    def follow(self, predecessor: PartitionExecutor) -> None:
        """Start only after ``predecessor`` (the same partition, revoked) finished its batch."""
        with predecessor.lock:
            if predecessor.scheduled:
                self.held = True
                predecessor.successor = self

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

    @property
    def in_lane(self) -> bool:
        """Its consumer runs in no virtual partition's lane (a lane says True)."""
        return False

    @property
    def kafka(self) -> Mapping[str, Any]:
        """The app's librdkafka settings."""
        return self.context.settings.kafka

    @property
    def tracing(self) -> Tracing | None:
        """The app's tracing (``None`` when the app has none)."""
        return self.context.tracing

    def first_waiting(self) -> Any | None:
        """The first message fetched and not processed yet (``None``: none)."""
        with self.lock:
            return self.pending.first()

    def run_shutdown(self) -> None:
        self._call("shutdown", ev.CONSUMER_SHUTDOWN)

    # -- worker threads -----------------------------------------------------------------------

    def run(self) -> None:
        """The job: process batches until nothing is pending (or the partition is held)."""
        self._job(None)

    def _job(self, first: list[Any] | None) -> None:
        """:meth:`run`, starting with ``first`` (a batch taken by no backlog) when given."""
        listener = self.listener
        listener.job_started()
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
                    if self.revoked or self.stopped or self.held or not (pending.size or self.eof):
                        self.scheduled = False
                        successor, self.successor = self.successor, None
                        if successor is not None:
                            successor._release()
                        return
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
                if drained:
                    listener.drained(self)
                if resume_fetching:
                    listener.resume(self.topic, self.partition)
                if batch:
                    self._process(batch)
                if eof:
                    self._call("eofed", ev.CONSUMER_EOFED)
        finally:
            if long_running and not self.revoked and not self._filter_held:
                listener.resume(self.topic, self.partition)
            # One job of this partition runs at a time: only that job writes the count.
            quick = time.perf_counter() - began < _QUICK_JOB
            self._quick_jobs = self._quick_jobs + 1 if quick else 0
            listener.job_finished()

    def _run_tick(self) -> None:
        self.listener.job_started()
        try:
            self._call("tick", ev.CONSUMER_TICKED)
        finally:
            with self.lock:
                self.scheduled = False
                restart = (
                    bool(self.pending) and not self.held and not self.revoked and not self.stopped
                )
                if restart:
                    self.scheduled = True
                else:  # revoked during the tick and assigned again: the new one may start
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
            consumer._executor = self
            self.context.prepare_consumer(consumer)
            self.consumer = consumer
        return consumer

    def _process(self, batch: list[Any]) -> None:
        first, through = batch[0].offset(), batch[-1].offset() + 1
        hold: tuple[Any, str, float] | None = None
        if self.route.filters:
            try:
                filtered = self._filter(batch)
            except Exception as exc:  # a filter's failure is the batch's: retry, DLQ, ...
                self._failed(batch, exc, time.perf_counter())
                return
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
        self.running = RunningBatch(batch[0].offset(), batch[-1].offset(), len(batch))
        self._abort_batch = False
        try:
            started = self._consume(consumer, batch, self._failed, self.pending.put_back)
        finally:
            self.running = None
        if started is None:
            return
        self.attempt = 0
        if not self._abort_batch and not self.route.manual_offset_management:
            self.mark(through, sync=False)
        self._consumed(consumer, batch, started)
        if hold is not None and not self._abort_batch:
            self._hold(hold[2])

    def _filter(self, batch: list[Any]) -> Filtered:
        """The route's filters over ``batch``: what they drop is reported (and marked with the
        rest), what they hold goes back to the backlog to wait."""
        filtered = apply_filters(self.route.filters, batch, self.route.deserializers, time.time())
        monitor = self.context.monitor
        if filtered.dropped and ev.FILTER_DROPPED in monitor.subscribed:
            for chosen, reason, raws in filtered.dropped:
                monitor.instrument(
                    ev.FILTER_DROPPED, filter=chosen, reason=reason, topic=self.topic,
                    partition=self.partition, count=len(raws), first_offset=raws[0].offset(),
                    last_offset=raws[-1].offset(),
                )  # fmt: skip
        if filtered.held:
            with self.lock:
                if not (self.revoked or self.stopped):
                    self.pending.put_back(filtered.held)
            if filtered.hold is not None and ev.FILTER_PAUSED in monitor.subscribed:
                chosen, reason, seconds = filtered.hold
                monitor.instrument(
                    ev.FILTER_PAUSED, filter=chosen, reason=reason, topic=self.topic,
                    partition=self.partition, offset=filtered.held[0].offset(),
                    count=len(filtered.held), seconds=seconds,
                )  # fmt: skip
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
                ev.ERROR_OCCURRED, type="consumer.consume.error", error=exc, consumer=self.consumer,
                topic=self.topic, partition=self.partition, first_offset=batch[0].offset(),
                last_offset=batch[-1].offset(), attempt=verdict.attempt, action=verdict.action,
                duration=time.perf_counter() - started,
            )  # fmt: skip
        if verdict.action != "retry" and retry:
            _gave_up.log(
                logging.ERROR, f"{self.topic}/{self.partition}",
                "%s/%s: consume raised at offset %s (attempt %s); %s: %r", self.topic, self.partition,
                retry[0].offset(), verdict.attempt,
                "moving it to the dead letter queue" if verdict.action == "dispatch" else "skipping it",
                exc,
            )  # fmt: skip
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
            self.topic, self.partition, batch[0].offset(), batch[-1].offset(), verdict.attempt,
            verdict.delay, exc,
        )  # fmt: skip
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.pending.put_back(retry)
            self.held = True
            self._cancel_resume_timer()
            self._resume_timer = self._timers.call_later(verdict.delay, self._release)

    def _report_dispatch_failure(self, offset: int, error: Exception) -> None:
        _copy_failed.log(
            logging.ERROR, f"{self.topic}/{self.partition}",
            "%s/%s: could not move offset %s to the dead letter queue (%r); it stays in the "
            "retry path", self.topic, self.partition, offset, error,
        )  # fmt: skip
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="consumer.dispatch.error", error=error, topic=self.topic,
                partition=self.partition, offset=offset, attempt=self.attempt,
            )  # fmt: skip

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

    def _cancel_resume_timer(self) -> None:
        timer, self._resume_timer = self._resume_timer, None
        if timer is not None:
            timer.cancel()

    def _call(self, hook: str, event: str) -> None:
        if self.consumer is not None:
            self._call_on(self.consumer, hook, event)

    def _run_revoked(self) -> None:
        self.listener.job_started()
        try:
            self._call("revoked", ev.CONSUMER_REVOKED)
        finally:
            self.listener.job_finished()

    # -- asked by the consumer (on its worker) and by the failure policy ----------------------

    @property
    def group_id(self) -> str:
        return self.listener.group_id

    def producer(self) -> Producer:
        """The app's producer."""
        return self.context.producer()

    def mark(self, next_offset: int, sync: bool) -> bool:
        """Remember ``next_offset`` as processed; the listener commits it (now, with ``sync``).

        librdkafka's consumer is only touched on the listener's thread: a worker calling it
        while the listener polls can wait for that poll (and the next) to let go."""
        if self.revoked:
            return False
        if self.marked is None or next_offset > self.marked:
            self.marked = next_offset
        if not sync or self.transactional:  # a transaction commits it
            return not self.revoked
        target = self._fence(next_offset)
        assert target is not None
        committed = self.listener.commit_now(self.topic, self.partition, target)
        return committed and target == next_offset and not self.revoked

    def send_held(self, offset: int, message: dict[str, Any], producer: Producer) -> DeliveryHandle:
        """Send ``message`` (a produce dict) without waiting, and commit nothing at or past
        ``offset`` until the broker acknowledged it (a dead letter, an at-least-once pipe, an
        RPC reply).

        A failed delivery is sent again after the topic's back-off, for as long as this
        partition is assigned; once it is revoked or the app stops, the offset stays
        uncommitted, so the message is read again rather than lost. Only commits wait for the
        report, so the producer's poller is not hurried for it."""
        return self.copies.send(offset, message, producer)

    def group_metadata(self) -> Any:
        return self.listener.group_metadata()

    def transactional_producer(self) -> Producer:
        """The app's transactional producer (consume-transform-produce transactions)."""
        return self.context.transactional_producer()

    def offsets_in_transactions(self) -> None:
        """From now on this partition's offsets are committed by transactions only: the
        listener no longer commits them (an older offset it committed could land after a
        transaction's and move the group back). The first time, what was marked before is
        committed synchronously, behind any asynchronous commit still on its way."""
        if self.transactional:
            return
        marked = self.committable()
        if marked is not None:
            self.listener.commit_now(self.topic, self.partition, marked)
        self.transactional = True

    def forget_group_metadata(self) -> None:
        """A transaction's offsets were refused: ask librdkafka for the group's metadata again
        (the generation may have moved on without an assignment)."""
        self.listener.forget_group_metadata()

    def enhance_dlq_message(self, dlq_message: dict[str, Any], message: Message) -> dict[str, Any]:
        enhanced = self._instance().enhance_dlq_message(dlq_message, message)
        return dlq_message if enhanced is None else enhanced

    def dispatch_to_dlq(
        self, message: Message, dlq_topic: str, error: BaseException | None = None
    ) -> None:
        """The consumer moves ``message`` to the dead letter queue itself (``error``: why)."""
        self.policy.dispatch(message, error, self.attempt, dlq_topic, self)

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

    def request_resume(self) -> None:
        self.listener.resume(self.topic, self.partition, then=self._release)
