"""One topic-partition's processing: its pending messages, its consumer instance, its offsets.

The listener adds fetched messages; at most one job per partition runs on the worker pool
at a time and takes batches of up to ``max_messages`` until nothing is pending, so order
within the partition holds while partitions run in parallel. After ``consume()`` returns,
the batch's last offset is stored for librdkafka's asynchronous commit; if it raises, the
batch goes back in front of the pending messages and the partition waits out a growing
pause before trying again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import transaction_offsets
from conveyor.instrumentation import events as ev
from conveyor.messages import Message, Messages
from conveyor.processing.workers import run_hook
from conveyor.routing.dead_letter_queue import dlq_message

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.processing.listener import Listener
    from conveyor.routing.topic import Topic

__all__ = ["PartitionExecutor"]

_log = logging.getLogger("conveyor.processing")


class PartitionExecutor:
    """Processing state of one assigned topic-partition in one listener."""

    def __init__(self, listener: Listener, route: Topic, partition: int) -> None:
        self.listener = listener
        self.route = route
        self.topic = route.name
        self.partition = partition
        settings = listener.app.settings
        self.max_messages = route.max_messages or settings.max_messages
        self._high_water = max(self.max_messages * 10, 2_000)
        self._low_water = self._high_water // 4
        self.pending: deque[Any] = deque()
        self.lock = threading.Lock()
        self.scheduled = False  # a job is queued or running
        self.revoked = False
        self.stopped = False
        self.held = False  # paused by the user or waiting out an error
        self.backpressure = False  # fetching paused in librdkafka while too much is pending
        self.eof = False
        self.marked: int | None = None  # the next offset to read, as last marked
        self.high_watermark: int | None = None  # as of the latest fetch
        self.attempt = 0  # failed attempts of the current batch so far
        self._marked_at_failure = -1
        self.consumer: Consumer | None = None
        # Set when this partition was revoked while a batch ran and then assigned again: the
        # new executor starts only once this one's last batch is over (order per partition).
        self.successor: PartitionExecutor | None = None
        self._resume_timer: threading.Timer | None = None
        self._abort_batch = False

    # -- listener thread ----------------------------------------------------------------------

    def add(self, raws: list[Any]) -> None:
        """Messages fetched for this partition, in order."""
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.pending.extend(raws)
            if self.listener.quieted:
                self.held = True
            start = not self.scheduled and not self.held
            if start:
                self.scheduled = True
            if len(self.pending) > self._high_water:
                self.listener.over_limit(self)
        if start:
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
            if self._resume_timer is not None:
                self._resume_timer.cancel()
        if self.consumer is not None and not self.stopped:
            self.listener.submit(self._run_revoked)

    # -- worker threads -----------------------------------------------------------------------

    def run(self) -> None:
        """The job: process batches until nothing is pending (or the partition is held)."""
        listener = self.listener
        listener.job_started()
        long_running = self.route.long_running_job
        if long_running:  # fetch nothing behind a long job; the listener keeps polling
            listener.command(lambda: listener.client.pause([(self.topic, self.partition)]))
        try:
            while True:
                resume_fetching = drained = False
                with self.lock:
                    if self.revoked or self.stopped or self.held or not (self.pending or self.eof):
                        self.scheduled = False
                        successor, self.successor = self.successor, None
                        if successor is not None:
                            successor._release()
                        return
                    count = min(self.max_messages, len(self.pending))
                    batch = [self.pending.popleft() for _ in range(count)]
                    eof = self.eof and not self.pending
                    if eof:
                        self.eof = False
                    drained = len(self.pending) < self._low_water
                    if self.backpressure and drained:
                        self.backpressure = False
                        resume_fetching = True
                if drained:
                    listener.drained(self)
                if resume_fetching:
                    listener.command(lambda: listener.client.resume([(self.topic, self.partition)]))
                if batch:
                    self._process(batch)
                if eof:
                    self._call("eofed", ev.CONSUMER_EOFED)
        finally:
            if long_running and not self.revoked:
                listener.command(lambda: listener.client.resume([(self.topic, self.partition)]))
            listener.job_finished()

    def tick(self) -> None:
        """Run the consumer's ``tick()`` if the partition is idle (listener thread schedules it)."""
        with self.lock:
            if self.scheduled or self.held or self.revoked or self.stopped or self.pending:
                return
            self.scheduled = True
        self.listener.submit(self._run_tick)

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
            if restart:
                self.listener.submit(self.run)
            self.listener.job_finished()

    def _instance(self) -> Consumer:
        consumer = self.consumer
        if consumer is None:
            assert self.route.consumer_class is not None
            consumer = self.route.consumer_class()
            consumer.app = self.listener.app
            consumer.topic = self.topic
            consumer.partition = self.partition
            consumer.route = self.route
            consumer._executor = self
            self.consumer = consumer
        return consumer

    def _process(self, batch: list[Any]) -> None:
        consumer = self._instance()
        high = self.high_watermark
        consumer.messages = messages = Messages(
            batch,
            self.route.deserializers,
            self.topic,
            self.partition,
            consumer_lag=None if high is None else max(0, high - batch[-1].offset() - 1),
        )
        monitor = self.listener.app.monitor
        subscribed = monitor.subscribed
        self._abort_batch = False
        if ev.CONSUMER_CONSUME in subscribed:
            monitor.instrument(
                ev.CONSUMER_CONSUME,
                consumer=consumer,
                topic=self.topic,
                partition=self.partition,
                count=len(batch),
            )
        started = time.perf_counter()
        try:
            run_hook(consumer.consume())
        except Exception as exc:
            self._failed(batch, exc, started)
            return
        except BaseException:
            # SystemExit, KeyboardInterrupt: never let the offset move past this batch.
            with self.lock:
                self.pending.extendleft(reversed(batch))
            raise
        if self.route.dead_letter_queue is None or self.route.dead_letter_queue.independent:
            self.attempt = 0
        elif self.marked is not None and batch[-1].offset() + 1 <= self.marked:
            self.attempt = 0  # the whole batch went through
        if not self._abort_batch and not self.route.manual_offset_management:
            self.mark(batch[-1].offset() + 1, sync=False)
        if ev.CONSUMER_CONSUMED in subscribed:
            monitor.instrument(
                ev.CONSUMER_CONSUMED, consumer=consumer, topic=self.topic, partition=self.partition,
                count=len(messages), first_offset=batch[0].offset(), last_offset=batch[-1].offset(),
                duration=time.perf_counter() - started,
            )  # fmt: skip

    def _failed(self, batch: list[Any], exc: Exception, started: float) -> None:
        dlq = self.route.dead_letter_queue
        first_unmarked = self.marked if self.marked is not None else batch[0].offset()
        if (
            dlq is not None
            and dlq.independent
            and self.marked is not None
            and self.marked > self._marked_at_failure
        ):
            self.attempt = 0  # progress since the last failure: each message gets its own retries
        self._marked_at_failure = self.marked if self.marked is not None else -1
        self.attempt += 1
        retry = [raw for raw in batch if raw.offset() >= first_unmarked]
        action = dlq.decide(exc, self.attempt) if dlq is not None else "retry"
        settings, route = self.listener.app.settings, self.route
        delay = route.pause_timeout or settings.pause_timeout
        exponential = route.pause_with_exponential_backoff
        if exponential if exponential is not None else settings.pause_with_exponential_backoff:
            ceiling = route.pause_max_timeout or settings.pause_max_timeout
            delay = min(max(ceiling, delay), delay * 2 ** (self.attempt - 1))
        monitor = self.listener.app.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED, type="consumer.consume.error", error=exc, consumer=self.consumer,
                topic=self.topic, partition=self.partition, first_offset=batch[0].offset(),
                last_offset=batch[-1].offset(), attempt=self.attempt, action=action,
                duration=time.perf_counter() - started,
            )  # fmt: skip
        if action != "retry" and retry:
            _log.error(
                "%s/%s: consume raised at offset %s (attempt %s); %s: %r", self.topic, self.partition,
                retry[0].offset(), self.attempt, "moving it to the dead letter queue" if action == "dispatch" else "skipping it",
                exc,
            )  # fmt: skip
            self._give_up(retry[0], exc, action)
            with self.lock:
                if not (self.revoked or self.stopped):
                    self.pending.extendleft(reversed(retry[1:]))
            return
        _log.error(
            "%s/%s: consume raised on offsets %s-%s (attempt %s); retrying in %.1f s: %r",
            self.topic, self.partition, batch[0].offset(), batch[-1].offset(), self.attempt, delay, exc,
        )  # fmt: skip
        with self.lock:
            if self.revoked or self.stopped:
                return
            self.pending.extendleft(reversed(retry))
            self.held = True
            self._resume_timer = threading.Timer(delay, self._release)
            self._resume_timer.daemon = True
            self._resume_timer.start()

    def _give_up(self, raw: Any, error: BaseException | None, action: str) -> None:
        """Move ``raw`` to the dead letter queue (or skip it), then mark it; the retry count restarts."""
        dlq = self.route.dead_letter_queue
        assert dlq is not None
        monitor = self.listener.app.monitor
        if action == "dispatch" and dlq.topic is not None:
            self.dispatch(raw, error, dlq.topic)
        else:
            _log.warning(
                "%s/%s: skipping offset %s after %s attempt(s)",
                self.topic,
                self.partition,
                raw.offset(),
                self.attempt,
            )
            if ev.DEAD_LETTER_QUEUE_SKIPPED in monitor.subscribed:
                monitor.instrument(
                    ev.DEAD_LETTER_QUEUE_SKIPPED, topic=self.topic, partition=self.partition, offset=raw.offset(),
                    attempts=self.attempt, error=error,
                )  # fmt: skip
            self.mark(raw.offset() + 1, sync=dlq.marking_method == "mark_as_consumed_sync")
        self.attempt = 0

    def dispatch(self, raw: Any, error: BaseException | None, dlq_topic: str) -> None:
        """Send ``raw`` to ``dlq_topic`` as the route says (sync or async, in a transaction or
        not), then mark it as consumed."""
        dlq = self.route.dead_letter_queue
        app = self.listener.app
        message = dlq_message(raw, dlq_topic, self.listener.group_id, self.attempt, error)
        consumer = self._instance()
        enhanced = consumer.enhance_dlq_message(message, Message(raw, self.route.deserializers))
        if enhanced is not None:
            message = enhanced
        sync_dispatch = dlq is None or dlq.dispatch_method == "produce_sync"
        sync_mark = dlq is not None and dlq.marking_method == "mark_as_consumed_sync"
        if dlq is not None and dlq.transactional:
            # The DLQ message and the consumer offset past it commit together, or neither does.
            listener = self.listener
            metadata = listener.call(listener.client.group_metadata)
            producer = app.transactional_producer
            with producer.transaction():
                producer.produce_async(**message)
                producer.transactions.send_offsets(
                    transaction_offsets([(self.topic, self.partition, raw.offset() + 1)]), metadata
                )
            self.mark(raw.offset() + 1, sync=False)
        else:
            if sync_dispatch:
                app.producer.produce_sync(**message)
            else:
                app.producer.produce_async(**message)
            self.mark(raw.offset() + 1, sync=sync_mark)
        monitor = app.monitor
        if ev.DEAD_LETTER_QUEUE_DISPATCHED in monitor.subscribed:
            monitor.instrument(
                ev.DEAD_LETTER_QUEUE_DISPATCHED, topic=self.topic, partition=self.partition, offset=raw.offset(),
                dlq_topic=dlq_topic, attempts=self.attempt, error=error,
            )  # fmt: skip

    def follow(self, predecessor: PartitionExecutor) -> None:
        """Start only after ``predecessor`` (the same partition, revoked) finished its batch."""
        with predecessor.lock:
            if predecessor.scheduled:
                self.held = True
                predecessor.successor = self

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
        consumer = self.consumer
        if consumer is None:
            return
        monitor = self.listener.app.monitor
        started = time.perf_counter()
        try:
            run_hook(getattr(consumer, hook)())
        except Exception as exc:
            _log.exception("%s/%s: %s() raised", self.topic, self.partition, hook)
            if ev.ERROR_OCCURRED in monitor.subscribed:
                monitor.instrument(
                    ev.ERROR_OCCURRED, type=f"consumer.{hook}.error", error=exc, consumer=consumer
                )
            return
        if event in monitor.subscribed:
            monitor.instrument(
                event,
                consumer=consumer,
                topic=self.topic,
                partition=self.partition,
                duration=time.perf_counter() - started,
            )

    def _run_revoked(self) -> None:
        self.listener.job_started()
        try:
            self._call("revoked", ev.CONSUMER_REVOKED)
        finally:
            self.listener.job_finished()

    def run_shutdown(self) -> None:
        self._call("shutdown", ev.CONSUMER_SHUTDOWN)

    # -- offsets and flow (called by the consumer, on its worker) -----------------------------

    def mark(self, next_offset: int, sync: bool) -> bool:
        """Remember ``next_offset`` as processed; the listener commits it (now, with ``sync``).

        librdkafka's consumer is only touched on the listener's thread: a worker calling it
        while the listener polls can wait for that poll (and the next) to let go."""
        if self.revoked:
            return False
        if self.marked is None or next_offset > self.marked:
            self.marked = next_offset
        if not sync:
            return True
        topic, partition = self.topic, self.partition
        committed = self.listener.call(
            lambda: self.listener.client.commit([(topic, partition, next_offset)])
        )
        return bool(committed) and not self.revoked

    def request_seek(self, offset: int) -> None:
        with self.lock:
            self.pending.clear()
            self._abort_batch = True
        self.listener.command(lambda: self._seek_now(offset))

    def _seek_now(self, offset: int) -> None:
        self.listener.discarding.add(self)  # what the current poll fetched predates the seek
        with self.lock:
            self.pending.clear()
        self.listener.client.seek(self.topic, self.partition, offset)

    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        with self.lock:
            self.held = True
            first = self.pending[0].offset() if self.pending else None
            self.pending.clear()
            self._abort_batch = True
        if offset is None:
            current = self.consumer.messages if self.consumer is not None else None
            offset = (
                self.marked
                if self.marked is not None
                else (current[0].offset if current else first)
            )

        def pause_now() -> None:
            self.listener.client.pause([(self.topic, self.partition)])
            if offset is not None:
                self._seek_now(offset)

        self.listener.command(pause_now)
        if timeout is not None:
            timer = threading.Timer(timeout, self.request_resume)
            timer.daemon = True
            with self.lock:
                if self._resume_timer is not None:
                    self._resume_timer.cancel()
                self._resume_timer = timer
            timer.start()

    def request_resume(self) -> None:
        def resume_now() -> None:
            self.listener.client.resume([(self.topic, self.partition)])
            self._release()

        self.listener.command(resume_now)
