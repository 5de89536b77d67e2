"""Spans built from hand-made messages with the SDK's in-memory exporter; the extra missing."""

from __future__ import annotations

import sys

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.propagate import get_global_textmap
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from conveyor import ConfigurationError, DeliveryError, Message
from conveyor.instrumentation import Monitor
from conveyor.messages import Deserializers
from conveyor.tracing import Tracing
from conveyor.tracing.tracer import error_type
from helpers import FakeRaw


def traceparent(trace_id: int, span_id: int) -> bytes:
    return f"00-{trace_id:032x}-{span_id:016x}-01".encode()


@pytest.fixture
def traced() -> tuple[Tracing, InMemorySpanExporter, Monitor]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monitor = Monitor()
    tracing = Tracing(monitor)
    tracing.enable(tracer_provider=provider, max_links=3)
    return tracing, exporter, monitor


def test_a_batch_links_up_to_max_links_and_has_no_parent(traced) -> None:
    tracing, exporter, _ = traced
    batch = [FakeRaw(n, headers=[("traceparent", traceparent(n + 1, n + 100))]) for n in range(5)]
    with tracing.processing("orders", 0, "group", batch):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    assert [link.context.span_id for link in span.links] == [100, 101, 102], "capped at max_links"
    assert span.attributes["messaging.batch.message_count"] == 5


def test_a_batch_of_one_is_its_message_child_and_skips_bad_context(traced) -> None:
    tracing, exporter, _ = traced
    with tracing.processing(
        "orders", 0, "g", [FakeRaw(7, [("traceparent", traceparent(5, 6))], key=b"k")]
    ):
        pass
    with tracing.processing("orders", 0, "g", [FakeRaw(8, [("traceparent", b"\x00junk")])]):
        pass
    good, bad = exporter.get_finished_spans()
    assert (good.parent.trace_id, good.parent.span_id) == (5, 6)
    assert good.context.trace_id == 5
    assert good.attributes["messaging.kafka.offset"] == 7
    assert good.attributes["messaging.kafka.message.key"] == "k"
    assert bad.parent is None, "a malformed context starts a new trace"
    assert not bad.links


@pytest.mark.parametrize("tracestate", [False, True], ids=["w3c-fast-path", "propagator"])
def test_of_several_traceparent_headers_the_last_one_is_the_parent(
    traced, tracestate: bool
) -> None:
    tracing, exporter, _ = traced
    headers = [("traceparent", traceparent(5, 6)), ("traceparent", traceparent(7, 8))]
    if tracestate:  # the propagator reads the headers then, not Conveyor's own reader
        headers.append(("tracestate", b"vendor=value"))
    with tracing.processing("orders", 0, "g", [FakeRaw(7, headers)]):
        pass
    message = Message(FakeRaw(8, headers), Deserializers())
    with tracing.message_span(message):
        pass
    batch = [FakeRaw(9, headers), FakeRaw(10)]
    with tracing.processing("orders", 0, "g", batch):
        pass
    alone, one, linked = exporter.get_finished_spans()
    for span in (alone, one):
        assert (span.parent.trace_id, span.parent.span_id) == (7, 8)
    assert [(link.context.trace_id, link.context.span_id) for link in linked.links] == [(7, 8)]


def test_a_failure_is_recorded_and_the_span_stays_current_until_exit(traced) -> None:
    tracing, exporter, _ = traced
    span = tracing.processing("orders", 0, "g", [FakeRaw(0)]).__enter__()
    span.failed(KeyError("x"))
    assert trace.get_current_span() is span.span
    span.__exit__(None, None, None)
    assert trace.get_current_span() is trace.INVALID_SPAN
    (finished,) = exporter.get_finished_spans()
    assert finished.attributes["error.type"] == "KeyError"
    assert finished.events[0].name == "exception"


def test_message_span_is_a_no_op_while_tracing_is_off() -> None:
    tracing = Tracing()
    message = Message(FakeRaw(0), Deserializers())
    with tracing.message_span(message) as span:
        assert span is None


def test_commits_become_settle_spans_per_topic(traced) -> None:
    _tracing, exporter, monitor = traced
    monitor.instrument(
        "offsets.committed", listener="l", group="g", sync=False, duration=0.002,
        committed_at=1_000.0, offsets=[("a", 0, 5), ("a", 1, 7), ("b", 0, 3)],
    )  # fmt: skip
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"settle a", "settle b"}
    assert spans["settle b"].attributes["messaging.kafka.offset"] == 3
    assert spans["settle a"].attributes["conveyor.commit.offsets"] == ("0@5", "1@7")
    assert spans["settle a"].attributes["messaging.operation.type"] == "settle"
    assert spans["settle a"].end_time - spans["settle a"].start_time == 2_000_000


def test_enabling_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    tracing = Tracing()
    with pytest.raises(ConfigurationError, match=r"conveyor\[otel\]"):
        tracing.enable()
    assert not tracing.enabled


def test_max_links_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_links"):
        Tracing().enable(max_links=-1)


def test_the_fast_w3c_path_writes_what_the_propagator_would(traced) -> None:
    tracing, _exporter, _ = traced
    headers, finish = tracing.sending("orders", b"k", -1, [("traceparent", b"stale"), ("h", b"v")])
    assert finish is not None
    (name, value) = headers[-1]
    assert name == "traceparent"
    assert [pair[0] for pair in headers] == ["h", "traceparent"], "the stale context is replaced"
    expected: dict[str, str] = {}
    span_context = tracing.context_of(FakeRaw(0, headers=headers))
    get_global_textmap().inject(expected, context=span_context)
    assert value == expected["traceparent"]

    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with_baggage, _ = tracing.sending("orders", None, -1, None)
    finally:
        context.detach(token)
    assert dict(with_baggage)["baggage"] == "tenant=acme", "baggage goes through the propagator"
    received = tracing.context_of(FakeRaw(1, headers=[(n, v.encode()) for n, v in with_baggage]))
    assert baggage.get_baggage("tenant", received) == "acme"


class CountingRaw(FakeRaw):
    reads = 0

    def headers(self) -> list[tuple[str, object]] | None:
        CountingRaw.reads += 1
        return super().headers()


def test_a_span_that_is_not_recorded_links_nothing_and_reads_no_header() -> None:
    provider = TracerProvider(sampler=ALWAYS_OFF)
    tracing = Tracing()
    tracing.enable(tracer_provider=provider)
    batch = [CountingRaw(n, headers=[("traceparent", traceparent(n + 1, n + 2))]) for n in range(3)]
    with tracing.processing("orders", 0, "g", batch) as span:
        assert not span.span.is_recording()
    assert CountingRaw.reads == 0, "sampled out: the batch's headers are not even read"


def test_a_broken_span_never_raises_into_the_worker(traced) -> None:
    tracing, _exporter, _ = traced
    process = tracing.processing("orders", 0, "g", [FakeRaw(0)]).__enter__()

    class Broken:
        def __getattr__(self, name: str) -> object:
            def fail(*_arguments: object, **_options: object) -> None:
                raise RuntimeError(name)

            return fail

    process.span = Broken()
    process.failed(ValueError("x"))
    process.__exit__(None, None, None)
    assert trace.get_current_span() is trace.INVALID_SPAN, "the context is restored all the same"


def test_error_type_takes_conveyors_error_names() -> None:
    failure = DeliveryError("too big", code=10, name="MSG_SIZE_TOO_LARGE")
    assert error_type(failure) == "MSG_SIZE_TOO_LARGE"
    assert error_type(KeyError("k")) == "KeyError"
