"""The spans of a batch handed to a sink, per record: ``queued {topic}`` (polled → handed to
the sink) and ``published {topic}`` (handed → acknowledged), children of the record's creation
context.

``published`` starts before the sink's ``deliver`` runs, so that a sink that passes records on
(the Broadcast sink, to its WebSocket and SSE clients) can give each its context
(:attr:`SinkSpans.traceparents`): whoever receives the record continues its trace, as a child
of the span that delivered it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conveyor.tracing import semconv as sc
from conveyor.tracing.headers import format_traceparent
from conveyor.tracing.semconv import mark_failed

__all__ = ["SinkSpans"]


class SinkSpans:
    """The spans of one batch of a sink route (see the module): the ``queued`` ones ended at
    ``handed``, the ``published`` ones open until :meth:`end`.

    Args:
        api: the tracer's OpenTelemetry names (``SpanKind``).
        tracer: the OpenTelemetry tracer.
        parents: each record's creation context (an OpenTelemetry context).
        attributes: each record's span attributes.
        polled: each record's poll time (wall-clock seconds).
        handed: when the batch is handed to the sink (wall-clock seconds).
    """

    __slots__ = ("_api", "published", "traceparents")

    def __init__(
        self,
        api: Any,
        tracer: Any,
        topic: str,
        parents: Sequence[Any],
        attributes: Sequence[dict[str, Any]],
        polled: Sequence[float],
        handed: float,
    ) -> None:
        self._api = api
        handed_ns = int(handed * 1e9)
        self.published: list[Any] = []
        self.traceparents: list[str] = []
        """Per record, the W3C ``traceparent`` of its ``published`` span."""
        for parent, fields, polled_at in zip(parents, attributes, polled, strict=True):
            queued = tracer.start_span(
                f"queued {topic}",
                context=parent,
                kind=api.SpanKind.INTERNAL,
                attributes=fields,
                start_time=min(int(polled_at * 1e9), handed_ns),
            )
            queued.end(end_time=handed_ns)
            published = tracer.start_span(
                f"published {topic}",
                context=parent,
                kind=api.SpanKind.PRODUCER,
                attributes=fields,
                start_time=handed_ns,
            )
            context = published.get_span_context()
            self.published.append(published)
            self.traceparents.append(
                format_traceparent(context.trace_id, context.span_id, context.trace_flags)
            )

    def end(self, acknowledged: float, failures: dict[int, tuple[str, str]]) -> None:
        """End the ``published`` spans at ``acknowledged`` (wall-clock seconds); ``failures``
        maps a record's position to the error type and message of one the sink did not
        deliver (its span gets ``error.type``)."""
        acknowledged_ns = int(acknowledged * 1e9)
        for index, span in enumerate(self.published):
            failure = failures.get(index)
            if failure is not None:
                mark_failed(self._api, span, *failure)
            span.end(end_time=acknowledged_ns)


def sink_attributes(
    topic: str, group: str, sink: str, partition: int, offset: int
) -> dict[str, Any]:
    """The attributes of one record's sink spans."""
    return {
        sc.SYSTEM: sc.KAFKA,
        sc.DESTINATION: topic,
        sc.PARTITION: str(partition),
        sc.OFFSET: offset,
        sc.CONSUMER_GROUP: group,
        "conveyor.sink": sink,
    }
