"""Running the user's hooks with their instrumentation: ``consume()`` over a batch (its
events, its ``process`` span, its per-stage latency; an exception handed to the failure path
inside the span, an interruption putting the batch back) and the other hooks (``revoked()``,
``shutdown()``...) with their events. Shared by partitions and their virtual partitions'
lanes (the executor is a ``ConsumeRuns``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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

__all__ = ["ConsumeRuns"]

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


class ConsumeRuns:
    """The hook-running half of a partition's executor (see the module): what it reads of the
    partition is declared here, and set by the executor."""

    topic: str
    partition: int
    route: Topic
    context: ProcessingContext
    lock: threading.Lock
    polls: PollTimes
    high_watermark: int | None
    revoked: bool
    last_timestamp: float | None
    tracing_time = 0.0
    """Seconds spent building and ending sampled ``process`` spans since the executor last
    reset it: the tracer's cost, which a partition's executor keeps out of a job's measured
    time (only it reads this: virtual partitions' lanes never run on the listener's thread)."""

    @property
    def group_id(self) -> str:
        raise NotImplementedError

    def _consume(
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
        run = self._consume_started(consumer, batch, extra, payloads)
        try:
            run_hook(consumer.consume())
        except Exception as exc:
            self._consume_failed(run, exc, failed)
            return None
        except BaseException as exc:
            self._consume_interrupted(run, exc, put_back)
            raise
        return self._consume_returned(run)

    async def _consume_async(
        self,
        consumer: Consumer,
        batch: list[Any],
        failed: Callable[[list[Any], Exception, float], None],
        put_back: Callable[[list[Any]], None],
        extra: dict[str, Any] | None = None,
        payloads: list[Any] | None = None,
    ) -> float | None:
        """:meth:`_consume` of an ``async def consume()``, awaited on the running loop."""
        run = self._consume_started(consumer, batch, extra, payloads)
        try:
            await consumer.consume()  # type: ignore[misc]
        except Exception as exc:
            self._consume_failed(run, exc, failed)
            return None
        except BaseException as exc:
            self._consume_interrupted(run, exc, put_back)
            raise
        return self._consume_returned(run)

    def _consume_started(
        self,
        consumer: Consumer,
        batch: list[Any],
        extra: dict[str, Any] | None,
        payloads: list[Any] | None = None,
    ) -> _ConsumeRun:
        high = self.high_watermark
        last_offset = batch[-1].offset()
        consumer.messages = Messages(
            batch,
            self.route.deserializers,
            self.topic,
            self.partition,
            consumer_lag=None if high is None else max(0, high - last_offset - 1),
            payloads=payloads,
        )
        monitor = self.context.monitor
        if ev.CONSUMER_CONSUME in monitor.subscribed:
            monitor.instrument(
                ev.CONSUMER_CONSUME, consumer=consumer, topic=self.topic, partition=self.partition,
                count=len(batch), **(extra or {}),
            )  # fmt: skip
        context = self.context
        tracing, latency = context.tracing, context.latency
        span = self._process_span(batch) if tracing is not None and tracing.enabled else None
        measure = latency is not None and latency.active
        wall_started = time.time() if measure else 0.0
        return _ConsumeRun(batch, span, wall_started, time.perf_counter())

    def _consume_failed(
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

    def _consume_interrupted(
        self, run: _ConsumeRun, error: BaseException, put_back: Callable[[list[Any]], None]
    ) -> None:
        with self.lock:
            put_back(run.batch)
        if run.span is not None:
            self._end_span(run.span, error)

    def _consume_returned(self, run: _ConsumeRun) -> float:
        batch = run.batch
        if run.span is not None:
            self._end_span(run.span, None)
        latency = self.context.latency
        if run.wall_started and latency is not None and not self.revoked:
            try:
                latency.consumed(
                    self.topic, self.partition, batch, self.polls, run.wall_started, time.time()
                )
            except Exception as error:  # measuring never stops processing
                _tracing_failed.log(
                    logging.ERROR, f"{self.topic}/{self.partition}:latency",
                    "%s/%s: could not record latency (%r)", self.topic, self.partition, error,
                )  # fmt: skip
        kind, milliseconds = batch[-1].timestamp()
        if kind:
            self.last_timestamp = milliseconds / 1000
        return run.started

    def _consumed(
        self,
        consumer: Consumer,
        batch: list[Any],
        started: float,
        extra: dict[str, Any] | None = None,
    ) -> None:
        monitor = self.context.monitor
        if ev.CONSUMER_CONSUMED in monitor.subscribed:
            monitor.instrument(
                ev.CONSUMER_CONSUMED, consumer=consumer, topic=self.topic, partition=self.partition,
                count=len(batch), first_offset=batch[0].offset(), last_offset=batch[-1].offset(),
                duration=time.perf_counter() - started, **(extra or {}),
            )  # fmt: skip

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
        tracing = self.context.tracing
        assert tracing is not None
        try:
            return tracing.processing(self.topic, self.partition, self.group_id, batch).__enter__()
        except Exception as error:
            _tracing_failed.log(
                logging.ERROR, f"{self.topic}/{self.partition}",
                "%s/%s: could not start the process span (%r); consuming without it",
                self.topic, self.partition, error,
            )  # fmt: skip
            return None

    def _call_on(self, consumer: Consumer, hook: str, event: str) -> None:
        monitor = self.context.monitor
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
            return
        if event in monitor.subscribed:
            monitor.instrument(
                event,
                consumer=consumer,
                topic=self.topic,
                partition=self.partition,
                duration=time.perf_counter() - started,
            )
