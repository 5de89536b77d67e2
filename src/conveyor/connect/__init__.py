"""Connectors: sinks that push a topic into another system (``app.routes.sink(topic, sink)``),
and workers that run connectors configured while they run (``conveyor connect worker``,
:mod:`conveyor.connect.runtime`).

A sink runs on the consumer engine: its records are spread over lanes (virtual partitions)
by key, so order per key holds and the committed offset never passes an undelivered record;
a slow or failing sink pauses its partitions with the route's back-off instead of buffering.
Built-in sinks are in :mod:`conveyor.connect.sinks`.
"""

from conveyor.connect.consumer import SinkBinding, SinkNotDelivered
from conveyor.connect.sink import DELIVERED, AsyncSink, Reject, Result, Retry, Sink, SinkRejected
from conveyor.connect.trace_context import delivery_traceparent

__all__ = [
    "DELIVERED",
    "AsyncSink",
    "Reject",
    "Result",
    "Retry",
    "Sink",
    "SinkBinding",
    "SinkNotDelivered",
    "SinkRejected",
    "delivery_traceparent",
]
