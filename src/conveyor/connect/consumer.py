"""The consumer a sink route runs: hands each lane's batch to the sink and acts on its answer
(see :mod:`conveyor.connect.sink`)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from conveyor.connect.sink import Reject, Retry, SinkRejected
from conveyor.connect.trace_context import delivering
from conveyor.consumer import Consumer, partition_handle
from conveyor.errors import ConveyorError
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import records_of

if TYPE_CHECKING:
    from conveyor.messages import Message
    from conveyor.tracing.sink_spans import SinkSpans

__all__ = ["SinkBinding", "SinkNotDelivered", "sink_consumer"]

_log = logging.getLogger("conveyor.connect")
_rejected = RateLimitedLog(_log)
_traces = RateLimitedLog(_log)


class SinkNotDelivered(ConveyorError):
    """A sink did not deliver a record of the batch.

    Raised when a sink answers :class:`~conveyor.connect.Retry` for a record (or not one
    result per record): by the sink route's consumer, so that the route's back-off and
    retries apply from that record on (the records before it count as delivered).

    What to do: nothing at once: the record is delivered again after the back-off; with a
    ``dead_letter_queue`` it goes there after ``retries`` attempts. If it keeps failing, the
    reason in the message (and the sink's own logs) says why.
    """


class SinkBinding:
    """One sink route's sink, opened when the app starts and closed when it stops."""

    def __init__(self, topic: str, sink: Any, asynchronous: bool) -> None:
        self.topic = topic
        self.sink = sink
        self.asynchronous = asynchronous
        self.opened = False
        self._open_lock = threading.Lock()
        self._async_open: asyncio.Lock | None = None

    def open(self) -> None:
        """Open a synchronous sink (an async one: :meth:`open_async`, on the event loop)."""
        if self.asynchronous:
            return
        with self._open_lock:
            if not self.opened:
                self.sink.open()
                self.opened = True

    async def open_async(self) -> None:
        if self.opened:
            return
        if self._async_open is None:
            self._async_open = asyncio.Lock()
        async with self._async_open:
            if not self.opened:
                await self.sink.open()
                self.opened = True

    def close(self) -> None:
        """Flush and close a synchronous sink."""
        if self.asynchronous or not self.opened:
            return
        try:
            self.sink.flush()
        finally:
            self.opened = False
            self.sink.close()

    async def close_async(self) -> None:
        if not self.asynchronous or not self.opened:
            return
        try:
            await self.sink.flush()
        finally:
            self.opened = False
            await self.sink.close()


def _act(consumer: Consumer, records: Sequence[Message], results: Any, rejectable: bool) -> None:
    """Act on ``deliver``'s answer: dead letters for rejects, a retry from the first Retry."""
    if results is None:
        return
    results = list(results)
    if len(results) != len(records):
        raise SinkNotDelivered(
            f"the sink answered {len(results)} results for {len(records)} records"
        )
    for index, result in enumerate(results):
        if result is None:
            continue
        if isinstance(result, Reject) and rejectable:
            _rejected.log(
                logging.WARNING,
                f"{consumer.topic}/{consumer.partition}",
                "%s/%s: the sink rejected offset %s (%s); to the dead letter queue",
                consumer.topic,
                consumer.partition,
                records[index].offset,
                result.reason,
            )
            consumer.dispatch_to_dlq(records[index], SinkRejected(result.reason))
            continue
        reason = result.reason if isinstance(result, Reject | Retry) else repr(result)
        if index:
            consumer.mark_as_consumed(records[index - 1])  # the ones before were delivered
        raise SinkNotDelivered(f"offset {records[index].offset}: {reason}")


class _SinkTrace:
    """With tracing on: the spans of one batch handed to a sink (``queued``, ``published``),
    started as it is handed over; while the sink delivers it, each record's ``published``
    context is its :func:`~conveyor.connect.delivery_traceparent`."""

    def __init__(self, spans: SinkSpans, records: Sequence[Message]) -> None:
        self.spans = spans
        self.delivering = delivering(records, spans.traceparents)

    @staticmethod
    def of(consumer: Consumer, sink: Any, records: Sequence[Message]) -> _SinkTrace | None:
        handle = partition_handle(consumer)
        tracing = handle.tracing
        if tracing is None or not tracing.enabled or not records:
            return None
        handed = time.time()
        raws = records_of(records)
        try:
            spans = tracing.sink_handing(
                raws[0].topic(),
                handle.group_id,
                type(sink).__name__,
                raws,
                [handle.polls.polled_at(raw.offset(), handed) for raw in raws],
                handed,
            )
        except Exception as trace_error:  # tracing never stops a sink
            _traces.log(logging.ERROR, "sink", "could not record sink spans (%r)", trace_error)
            return None
        return None if spans is None else _SinkTrace(spans, records)

    def done(self, records: Sequence[Message], results: Any, error: Exception | None) -> None:
        acknowledged = time.time()
        if error is not None:
            failures = dict.fromkeys(range(len(records)), (type(error).__name__, str(error)))
        else:
            failures = {
                index: (type(result).__name__, getattr(result, "reason", repr(result)))
                for index, result in enumerate(results or ())
                if result is not None
            }
        try:
            self.spans.end(acknowledged, failures)
        except Exception as trace_error:  # tracing never stops a sink
            _traces.log(logging.ERROR, "sink", "could not record sink spans (%r)", trace_error)


def sink_consumer(binding: SinkBinding, rejectable: bool) -> type[Consumer]:
    """The consumer class of a sink route (``rejectable``: the route has a DLQ topic, so a
    rejected record goes there; without one it is retried like any failure)."""

    if binding.asynchronous:

        class AsyncSinkConsumer(Consumer):
            async def consume(self) -> None:
                await binding.open_async()
                records = list(self.messages)
                trace = _SinkTrace.of(self, binding.sink, records)
                try:
                    if trace is None:
                        results = await binding.sink.deliver(records)
                    else:
                        with trace.delivering:
                            results = await binding.sink.deliver(records)
                except Exception as error:
                    if trace is not None:
                        trace.done(records, None, error)
                    raise
                if trace is not None:
                    trace.done(records, results, None)
                _act(self, records, results, rejectable)

        AsyncSinkConsumer.__name__ = AsyncSinkConsumer.__qualname__ = (
            f"{type(binding.sink).__name__}Consumer"
        )
        return AsyncSinkConsumer

    class SinkConsumer(Consumer):
        def consume(self) -> None:
            records = list(self.messages)
            trace = _SinkTrace.of(self, binding.sink, records)
            try:
                if trace is None:
                    results = binding.sink.deliver(records)
                else:
                    with trace.delivering:
                        results = binding.sink.deliver(records)
            except Exception as error:
                if trace is not None:
                    trace.done(records, None, error)
                raise
            if trace is not None:
                trace.done(records, results, None)
            _act(self, records, results, rejectable)

    SinkConsumer.__name__ = SinkConsumer.__qualname__ = f"{type(binding.sink).__name__}Consumer"
    return SinkConsumer
