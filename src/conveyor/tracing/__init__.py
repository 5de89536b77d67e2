"""Tracing: W3C trace context in Kafka headers and OpenTelemetry spans on every hop
(``app.tracing``, extra ``conveyor[otel]``), and per-stage latency histograms that need no
OpenTelemetry at all (``app.latency``)."""

from conveyor.tracing.histogram import Histogram, Summary
from conveyor.tracing.latency import PRODUCED_AT, STAGES, Latency
from conveyor.tracing.tracer import ProcessSpan, Tracing

__all__ = [
    "PRODUCED_AT",
    "STAGES",
    "Histogram",
    "Latency",
    "ProcessSpan",
    "Summary",
    "Tracing",
]
