"""``HookRuns``: running the user's hooks with their instrumentation: ``consume()`` over a
batch (its events, its ``process`` span, its per-stage latency; an exception handed to the
failure path inside the span, an interruption putting the batch back) and the other hooks
(``revoked()``, ``shutdown()``...) with their events. Each partition's executor owns one
(``executor.hooks``), shared by its virtual partitions' lanes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.hook_results import run_hook
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import Messages

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.processing.context import ProcessingContext
    from conveyor.routing.topic import Topic
    from conveyor.tracing import ProcessSpan
    from conveyor.tracing.carried import CarriedProcess
    from conveyor.tracing.latency import PollTimes

__all__ = ["HookRuns", "HookedPartition"]

_log = logging.getLogger("conveyor.processing")
_tracing_failed = RateLimitedLog(_log)
# A hook's error type is Karafka's (``consumer.eofed.error``), as its event is (``consumer.eofed``),
# whichever Python name the hook has.
_KARAFKA_NAMES = {"reached_end": "eofed"}


class _ConsumeRun:
    """One ``consume()`` call in progress: its batch, span and start times."""

    __slots__ = ("batch", "span", "started", "wall_started")

    def __init__(
        self,
        batch: list[Any],
        span: ProcessSpan | CarriedProcess | None,
        wall_started: float,
        started: float,
    ) -> None:
        self.batch = batch
        self.span = span
        self.wall_started = wall_started  # time.time() when latency is measured, else 0.0
        self.started = started  # perf_counter()


class HookedPartition(Protocol):
    """The partition whose hooks run, as its runs read it: what is fixed when it is made, and
    its high watermark and revocation as they change."""

    @property
    def topic(self) -> str:
        """The partition's topic."""

    @property
    def partition(self) -> int:
        """The partition's number."""

    @property
    def group_id(self) -> str:
        """The consumer group that reads it."""

    @property
    def route(self) -> Topic:
        """Its route (the deserializers of its messages)."""

    @property
    def context(self) -> ProcessingContext:
        """The app's monitor, tracing and latency."""

    @property
    def lock(self) -> threading.Lock:
        """The partition's lock (held to put an interrupted batch back)."""

    @property
    def polls(self) -> PollTimes:
        """When each fetch came (the latency of a batch)."""

    @property
    def high_watermark(self) -> int | None:
        """The partition's end as of the latest fetch (a batch's lag)."""

    @property
    def revoked(self) -> bool:
        """Whether the group took the partition away (no latency is recorded then)."""


class HookRuns:
    """The runs of one partition's hooks (see the module)."""

    def __init__(self, owner: HookedPartition) -> None:
        self._owner = owner
        self.topic = owner.topic
        self.partition = owner.partition
        self._group_id = owner.group_id
        self._route = owner.route
        self._context = owner.context
        self._lock = owner.lock
        self._polls = owner.polls
        self.tracing_time = 0.0
        """Seconds spent building and ending sampled ``process`` spans since the executor last
        reset it: the tracer's cost, which a partition's executor keeps out of a job's measured
        time (only it reads this: virtual partitions' lanes never run on the listener's
        thread)."""
        self.last_timestamp: float | None = None
        """The timestamp (seconds) of the last message of the last batch ``consume()``
        returned from: how far behind the partition is in time."""

    def consume(
        self,
        consumer: Consumer,
        batch: list[Any],
        failed: Callable[[list[Any], Exception, float], None],
        put_back: Callable[[list[Any]], None],
        extra: dict[str, Any] | None = None,
        payloads: list[Any] | None = None,
    ) -> float | None:
        """Run ``consumer.consume()`` over ``batch``, with its event, span and latency.

        Returns when it started (``perf_counter``), or ``None`` when it raised: then
        ``failed(batch, error, started)`` ran, inside the batch's span. A ``BaseException``
        (SystemExit, KeyboardInterrupt) puts the batch back (``put_back``) and propagates:
        the offset never moves past it. ``extra`` goes into the consume event; ``payloads``
        are the batch's, decoded already (by the check against the route's models)."""
        run = self._started(consumer, batch, extra, payloads)
        try:
            run_hook(consumer.consume())
        except Exception as exc:
            self._failed(run, exc, failed)
            return None
        except BaseException as exc:
            self._interrupted(run, exc, put_back)
            raise
        return self._returned(run)

    async def consume_async(
        self,
        consumer: Consumer,
        batch: list[Any],
        failed: Callable[[list[Any], Exception, float], None],
        put_back: Callable[[list[Any]], None],
        extra: dict[str, Any] | None = None,
        payloads: list[Any] | None = None,
    ) -> float | None:
        """:meth:`consume` of an ``async def consume()``, awaited on the running loop."""
        run = self._started(consumer, batch, extra, payloads)
        try:
            await consumer.consume()  # type: ignore[misc]
        except Exception as exc:
            self._failed(run, exc, failed)
            return None
        except BaseException as exc:
            self._interrupted(run, exc, put_back)
            raise
        return self._returned(run)

    def _started(
        self,
        consumer: Consumer,
        batch: list[Any],
        extra: dict[str, Any] | None,
        payloads: list[Any] | None = None,
    ) -> _ConsumeRun:
        high = self._owner.high_watermark
        last_offset = batch[-1].offset()
        consumer.messages = Messages(
            batch,
            self._route.deserializers,
            self.topic,
            self.partition,
            consumer_lag=None if high is None else max(0, high - last_offset - 1),
            payloads=payloads,
        )
        context = self._context
        monitor = context.monitor
        if ev.CONSUMER_CONSUME in monitor.subscribed:
            monitor.instrument(
                ev.CONSUMER_CONSUME,
                consumer=consumer,
                topic=self.topic,
                partition=self.partition,
                count=len(batch),
                **(extra or {}),
            )
        tracing, latency = context.tracing, context.latency
        span = self._process_span(batch) if tracing is not None and tracing.enabled else None
        measure = latency is not None and latency.active
        wall_started = time.time() if measure else 0.0
        return _ConsumeRun(batch, span, wall_started, time.perf_counter())

    def _failed(
        self,
        run: _ConsumeRun,
        error: Exception,
        failed: Callable[[list[Any], Exception, float], None],
    ) -> None:
        span = run.span
        if span is None:
            failed(run.batch, error, run.started)
            return
        span.failed(error)
        try:  # inside the span: a dead letter sent for this failure continues its trace
            failed(run.batch, error, run.started)
        finally:
            self._end_span(span, None)

    def _interrupted(
        self, run: _ConsumeRun, error: BaseException, put_back: Callable[[list[Any]], None]
    ) -> None:
        with self._lock:
            put_back(run.batch)
        if run.span is not None:
            self._end_span(run.span, error)

    def _returned(self, run: _ConsumeRun) -> float:
        batch = run.batch
        if run.span is not None:
            self._end_span(run.span, None)
        latency = self._context.latency
        if run.wall_started and latency is not None and not self._owner.revoked:
            try:
                latency.consumed(
                    self.topic, self.partition, batch, self._polls, run.wall_started, time.time()
                )
            except Exception as error:  # measuring never stops processing
                _tracing_failed.log(
                    logging.ERROR,
                    f"{self.topic}/{self.partition}:latency",
                    "%s/%s: could not record latency (%r)",
                    self.topic,
                    self.partition,
                    error,
                )
        kind, milliseconds = batch[-1].timestamp()
        if kind:
            self.last_timestamp = milliseconds / 1000
        return run.started

    def consumed(
        self,
        consumer: Consumer,
        batch: list[Any],
        started: float,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """``consumer``'s ``consume()`` of ``batch`` returned (``started``: as :meth:`consume`
        returned it) and the batch is settled: its event, with ``extra``."""
        monitor = self._context.monitor
        if ev.CONSUMER_CONSUMED in monitor.subscribed:
            monitor.instrument(
                ev.CONSUMER_CONSUMED,
                consumer=consumer,
                topic=self.topic,
                partition=self.partition,
                count=len(batch),
                first_offset=batch[0].offset(),
                last_offset=batch[-1].offset(),
                duration=time.perf_counter() - started,
                **(extra or {}),
            )

    def _end_span(self, span: ProcessSpan | CarriedProcess, error: BaseException | None) -> None:
        """Exit ``span`` (``error``: what interrupted the batch); its cost (nothing unless it
        was kept) goes to :attr:`tracing_time`."""
        if error is None:
            span.__exit__(None, None, None)
        else:
            span.__exit__(type(error), error, error.__traceback__)
        self.tracing_time += span.cost

    def _process_span(self, batch: list[Any]) -> ProcessSpan | CarriedProcess | None:
        """The batch's ``process`` span, entered; ``None`` if tracing failed (it never stops
        processing)."""
        tracing = self._context.tracing
        assert tracing is not None
        try:
            return tracing.processing(self.topic, self.partition, self._group_id, batch).__enter__()
        except Exception as error:
            _tracing_failed.log(
                logging.ERROR,
                f"{self.topic}/{self.partition}",
                "%s/%s: could not start the process span (%r); consuming without it",
                self.topic,
                self.partition,
                error,
            )
            return None

    def call(self, consumer: Consumer, hook: str, event: str) -> bool:
        """Run ``consumer``'s ``hook`` (``revoked``, ``tick``, ``shutdown``...) with ``event``;
        what it raises is logged and reported, never raised (False then)."""
        monitor = self._context.monitor
        started = time.perf_counter()
        try:
            run_hook(getattr(consumer, hook)())
        except Exception as exc:
            _log.exception("%s/%s: %s() raised", self.topic, self.partition, hook)
            if ev.ERROR_OCCURRED in monitor.subscribed:
                monitor.instrument(
                    ev.ERROR_OCCURRED,
                    type=f"consumer.{_KARAFKA_NAMES.get(hook, hook)}.error",
                    error=exc,
                    consumer=consumer,
                )
            return False
        if event in monitor.subscribed:
            monitor.instrument(
                event,
                consumer=consumer,
                topic=self.topic,
                partition=self.partition,
                duration=time.perf_counter() - started,
            )
        return True
