"""Sink spans with tracing on: each record handed to a sink gets ``queued {topic}`` (polled →
handed to the sink) and ``published {topic}`` (handed → acknowledged, ``error.type`` when not
delivered), children of the producer's trace context from its headers."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import StatusCode

from conveyor import App
from conveyor.connect import Reject
from helpers import running
from integration.tracing.test_tracing import Spans


class Picky:
    """Delivers everything but the record whose payload says ``"bad"``."""

    def open(self) -> None: ...

    def deliver(self, records: Sequence[Any]) -> list[Any]:
        return [Reject("bad record") if r.payload.get("bad") else None for r in records]

    def flush(self) -> None: ...

    def close(self) -> None: ...


def test_each_record_gets_queued_and_published_spans_in_its_trace(
    kafka_bootstrap: str, new_topic
) -> None:
    topic, dlq = new_topic(partitions=1), new_topic(partitions=1)
    exporter = Spans()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = App(
        client_id="test",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"},
        max_wait_time=0.2,
    )
    app.tracing.enable(tracer_provider=provider)
    app.routes.sink(topic, Picky(), lanes=4, dead_letter_queue=dlq)
    with running(app):
        for n in range(5):
            app.producer.produce_sync(topic=topic, key=f"k{n}", payload={"n": n, "bad": n == 3})
        exporter.wait_for(lambda spans: sum(s.name == f"published {topic}" for s in spans) >= 5)
    provider.shutdown()
    sends = {s.context.trace_id: s for s in exporter.named(f"send {topic}")}
    queued = exporter.named(f"queued {topic}")
    published = exporter.named(f"published {topic}")
    assert len(queued) == len(published) == 5
    for span in queued + published:
        send = sends[span.context.trace_id]  # the producer's trace
        assert span.parent is not None
        assert span.parent.span_id == send.context.span_id
        assert span.attributes["conveyor.sink"] == "Picky"
    for queue_span in queued:
        [publish] = [
            p
            for p in published
            if p.attributes["messaging.kafka.offset"]
            == queue_span.attributes["messaging.kafka.offset"]
        ]
        assert queue_span.end_time <= publish.start_time, "queued, then published"
    failed = [p for p in published if p.status.status_code == StatusCode.ERROR]
    assert [p.attributes["messaging.kafka.offset"] for p in failed] == [3]
    assert failed[0].attributes["error.type"] == "Reject"
