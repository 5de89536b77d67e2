"""OpenTelemetry tracing against the real broker, read back with the SDK's exporter interface:
one trace across produce → consume → pipe → consume → dead letter; an RPC call as one trace;
send spans that end on the delivery report (with ``error.type`` when it fails); process spans
linked to every message of a batch; no headers while tracing is off; malformed context."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from conveyor import App, Consumer, DeliveryError, Producer
from conveyor.rpc import Client, Handlers
from conveyor.tracing.headers import parse_traceparent
from helpers import Record, running


class Spans(SpanExporter):
    """Finished spans, and a condition to wait on for the ones a test expects."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.finished: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.changed:
            self.finished.extend(spans)
            self.changed.notify_all()
        return SpanExportResult.SUCCESS

    def wait_for(
        self, predicate: Callable[[list[ReadableSpan]], bool], timeout: float = 60
    ) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.finished), timeout), [
                span.name for span in self.finished
            ]

    def named(self, name: str) -> list[ReadableSpan]:
        with self.changed:
            return [span for span in self.finished if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [span.name for span in self.finished])
        return found[0]


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, Spans]]:
    exporter = Spans()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def make_app(bootstrap: str, **options: Any) -> App:
    kafka = {"bootstrap.servers": bootstrap, "group.id": f"trace-{uuid.uuid4().hex[:6]}"}
    return App(client_id="traced", kafka=kafka, max_wait_time=0.05, **options)


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_one_trace_spans_produce_consume_pipe_consume_and_dead_letter(
    kafka_bootstrap: str, new_topic, read_messages, spans
) -> None:
    provider, exported = spans
    first, second, dlq = new_topic(), new_topic(), new_topic()

    class Forwarder(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                self.pipe_sync(topic=second, message=message)

    class Failing(Consumer):
        def consume(self) -> None:
            raise ValueError("cannot handle this one")

    app = make_app(kafka_bootstrap)
    app.routes.topic(first, Forwarder)
    app.routes.topic(second, Failing, dead_letter_queue={"topic": dlq, "max_retries": 0})
    app.tracing.enable(tracer_provider=provider)
    tracer = provider.get_tracer("test")
    with running(app):
        with tracer.start_as_current_span("checkout") as root:
            report = app.producer.produce_sync(topic=first, payload=b"order", key="customer-7")
        dead = read_messages(dlq, 1)
        exported.wait_for(lambda done: any(s.name == f"send {dlq}" for s in done))

    trace_id = root.get_span_context().trace_id
    send_first = exported.one(f"send {first}")
    process_first = exported.one(f"process {first}")
    send_second = exported.one(f"send {second}")
    process_second = exported.one(f"process {second}")
    send_dlq = exported.one(f"send {dlq}")
    chain = [send_first, process_first, send_second, process_second, send_dlq]
    assert {span.context.trace_id for span in chain} == {trace_id}, "one trace end to end"
    assert parent_of(send_first) == root.get_span_context().span_id
    assert parent_of(process_first) == send_first.context.span_id
    assert parent_of(send_second) == process_first.context.span_id
    assert parent_of(process_second) == send_second.context.span_id
    assert parent_of(send_dlq) == process_second.context.span_id, "the dead letter joins the trace"

    assert send_first.kind is SpanKind.PRODUCER
    assert process_first.kind is SpanKind.CONSUMER
    assert dict(send_first.attributes) == {
        "messaging.system": "kafka",
        "messaging.destination.name": first,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.kafka.message.key": "customer-7",
        "messaging.destination.partition.id": str(report.partition),
        "messaging.kafka.offset": report.offset,  # known only once the broker acknowledged it
    }
    attributes = dict(process_first.attributes)
    assert attributes["messaging.consumer.group.name"] == app.routes.default_group
    assert attributes["messaging.batch.message_count"] == 1
    assert attributes["messaging.kafka.offset"] == report.offset
    assert attributes["messaging.operation.type"] == "process"
    assert [link.context.span_id for link in process_first.links] == [send_first.context.span_id]
    assert process_second.status.status_code is StatusCode.ERROR
    assert process_second.attributes["error.type"] == "ValueError"
    assert process_first.status.status_code is StatusCode.UNSET

    headers = dict(dead[0].headers())
    assert [name for name, _ in dead[0].headers()].count("traceparent") == 1, (
        "replaced, not doubled"
    )
    parsed = parse_traceparent(headers["traceparent"])
    assert parsed is not None
    assert parsed[:2] == (trace_id, send_dlq.context.span_id)


def test_an_rpc_call_is_one_trace(kafka_bootstrap: str, new_topic, spans) -> None:
    provider, exported = spans
    commands, results = new_topic(), new_topic()
    handlers = Handlers()

    @handlers.register("add")
    def add(a: int, b: int) -> int:
        return a + b

    server = make_app(kafka_bootstrap)
    server.routes.rpc(commands, handlers, results_topic=results)
    server.tracing.enable(tracer_provider=provider)
    caller = make_app(kafka_bootstrap)
    caller.tracing.enable(tracer_provider=provider)
    assigned = threading.Event()
    server.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
    with running(server), Client(caller, commands_topic=commands, results_topic=results) as client:
        assert assigned.wait(30)
        assert client.call("add", 2, 3, timeout=30) == 5
        exported.wait_for(lambda done: any(s.name == f"send {results}" for s in done))
    caller.producer.close()

    call = exported.one("call add")
    send_request = exported.one(f"send {commands}")
    process = exported.one(f"process {commands}")
    send_reply = exported.one(f"send {results}")
    receive = exported.one(f"receive {results}")
    chain = [call, send_request, process, send_reply, receive]
    assert len({span.context.trace_id for span in chain}) == 1, (
        "one trace, caller to handler and back"
    )
    assert call.parent is None
    assert call.kind is SpanKind.CLIENT
    assert parent_of(send_request) == call.context.span_id
    assert parent_of(process) == send_request.context.span_id
    assert parent_of(send_reply) == process.context.span_id
    assert parent_of(receive) == send_reply.context.span_id
    assert call.end_time >= receive.end_time, "the call ends once its reply was received"


def test_a_send_span_ends_on_the_delivery_report_with_error_type(
    kafka_bootstrap: str, new_topic, spans
) -> None:
    provider, exported = spans
    topic = new_topic(config={"max.message.bytes": "1000"})
    app = make_app(kafka_bootstrap)
    app.tracing.enable(tracer_provider=provider)
    try:
        with pytest.raises(DeliveryError) as refused:
            app.producer.produce_sync(topic=topic, payload=b"x" * 5000)
        with pytest.raises(DeliveryError):  # refused by librdkafka at once: no report will come
            app.producer.produce_async(topic=topic, payload=b"y", partition=7)
    finally:
        app.producer.close()
    failed = exported.named(f"send {topic}")
    assert len(failed) == 2, "every send span ends, refused at once or by the broker"
    by_broker, at_once = failed
    assert by_broker.attributes["error.type"] == refused.value.name == "MSG_SIZE_TOO_LARGE"
    assert by_broker.status.status_code is StatusCode.ERROR
    assert "messaging.kafka.offset" not in by_broker.attributes
    assert at_once.status.status_code is StatusCode.ERROR
    assert at_once.attributes["error.type"]


def test_process_spans_link_to_every_message_of_their_batch(
    kafka_bootstrap: str, new_topic, spans
) -> None:
    provider, exported = spans
    topic = new_topic()
    app = make_app(kafka_bootstrap, max_messages=50)
    app.tracing.enable(tracer_provider=provider)
    seen = Record()

    class Counting(Consumer):
        def consume(self) -> None:
            seen.add(*(message.offset for message in self.messages))

    app.routes.topic(topic, Counting)
    app.producer.produce_many_sync(
        [{"topic": topic, "payload": f"m{n}".encode(), "key": f"k{n}"} for n in range(30)]
    )
    with running(app):
        assert seen.wait_for(lambda offsets: len(set(offsets)) == 30)
        exported.wait_for(
            lambda done: (
                sum(
                    s.attributes["messaging.batch.message_count"]
                    for s in done
                    if s.name == f"process {topic}"
                )
                >= 30
            )
        )
    sends = {span.context.span_id for span in exported.named(f"send {topic}")}
    assert len(sends) == 30
    processes = exported.named(f"process {topic}")
    linked: set[int] = set()
    for process in processes:
        count = process.attributes["messaging.batch.message_count"]
        assert len(process.links) == count
        linked.update(link.context.span_id for link in process.links)
    assert linked == sends
    assert any(p.attributes["messaging.batch.message_count"] > 1 for p in processes), (
        "the test wants a batch of several"
    )
    batched = [p for p in processes if p.attributes["messaging.batch.message_count"] > 1]
    assert all(p.parent is None for p in batched), "a batch has no single parent: it links"


def test_no_trace_context_in_headers_while_tracing_is_off(
    kafka_bootstrap: str, new_topic, read_messages, spans
) -> None:
    provider, exported = spans
    topic = new_topic()
    app = make_app(kafka_bootstrap)
    try:
        app.producer.produce_sync(topic=topic, payload=b"plain", headers={"h": "v"})
        app.tracing.enable(tracer_provider=provider)
        app.producer.produce_sync(topic=topic, payload=b"traced")
        app.tracing.disable()
        app.producer.produce_many_sync([{"topic": topic, "payload": b"plain again"}])
    finally:
        app.producer.close()
    plain, traced, plain_again = read_messages(topic, 3)
    assert [name for name, _ in plain.headers() or []] == ["h"]
    assert [name for name, _ in traced.headers()] == ["traceparent"], "the positive marker"
    assert plain_again.headers() is None
    assert len(exported.named(f"send {topic}")) == 1


def test_a_malformed_traceparent_starts_a_new_trace_and_loses_nothing(
    kafka_bootstrap: str, new_topic, spans
) -> None:
    provider, exported = spans
    topic = new_topic()
    garbage = ["00-not-a-trace", "zz-" + "a" * 32 + "-" + "b" * 16 + "-01", "\xff"]
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for value in garbage:
            producer.produce_sync(topic=topic, payload=b"m", headers=[("traceparent", value)])
        producer.produce_sync(
            topic=topic, payload=b"binary", headers=[("traceparent", b"\x00\xff")]
        )
    seen = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            seen.add(*(message.offset for message in self.messages))

    app = make_app(kafka_bootstrap, max_messages=1)
    app.routes.topic(topic, Reader)
    app.tracing.enable(tracer_provider=provider)
    with running(app):
        assert seen.wait_for(lambda offsets: sorted(set(offsets)) == [0, 1, 2, 3])
        exported.wait_for(lambda done: sum(s.name == f"process {topic}" for s in done) >= 4)
    processes = exported.named(f"process {topic}")
    assert all(process.parent is None for process in processes), "each starts a new trace"
    assert all(not process.links for process in processes)
    assert len({process.context.trace_id for process in processes}) == 4
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_of_two_traceparent_headers_the_last_one_is_the_parent(
    kafka_bootstrap: str, new_topic, spans
) -> None:
    """A message that carries two ``traceparent`` headers (a hop that appended its own to the
    headers it copied) continues the trace of the last one, as ``Message.headers`` reads the
    last value of a repeated name; with ``tracestate`` too, the propagator reads it the same."""
    provider, exported = spans
    topic = new_topic()
    older = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    newer = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(
            topic=topic, payload=b"fast", headers=[("traceparent", older), ("traceparent", newer)]
        )
        producer.produce_sync(
            topic=topic,
            payload=b"propagator",
            headers=[("traceparent", older), ("tracestate", "v=1"), ("traceparent", newer)],
        )
    seen = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                assert message.headers["traceparent"] == newer.encode()
            seen.add(*(message.offset for message in self.messages))

    app = make_app(kafka_bootstrap, max_messages=1)
    app.routes.topic(topic, Reader)
    app.tracing.enable(tracer_provider=provider)
    with running(app):
        assert seen.wait_for(lambda offsets: sorted(set(offsets)) == [0, 1])
        exported.wait_for(lambda done: sum(s.name == f"process {topic}" for s in done) >= 2)
    processes = exported.named(f"process {topic}")
    assert len(processes) == 2
    for process in processes:
        assert process.parent is not None
        assert (process.parent.trace_id, process.parent.span_id) == (
            int("c" * 32, 16),
            int("d" * 16, 16),
        )


def test_a_failing_send_hook_or_tracer_never_stops_a_message(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()

    class BrokenHook:
        def sending(self, *_arguments: object) -> tuple[list, None]:
            raise RuntimeError("hook bug")

    class BrokenProvider:
        def get_tracer(self, *_arguments: object) -> object:
            return self

        def start_span(self, *_arguments: object, **_options: object) -> object:
            raise RuntimeError("tracer bug")

    seen = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            seen.add(*(message.raw_payload for message in self.messages))

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Reader)
    app.producer.add_send_hook(BrokenHook())
    app.producer.produce_sync(topic=topic, payload=b"sent anyway")
    app.tracing.enable(tracer_provider=BrokenProvider())
    app.producer.produce_many_sync([{"topic": topic, "payload": b"and this"}])
    with running(app):
        assert seen.wait_for(lambda items: items == [b"sent anyway", b"and this"])
    assert [m.value() for m in read_messages(topic, 2)] == [b"sent anyway", b"and this"]


def test_an_unsampled_trace_passes_through_as_a_header_copy_and_a_sampled_one_is_traced(
    kafka_bootstrap: str, new_topic, read_messages, spans
) -> None:
    """An upstream's sampling decision is honoured: a message whose traceparent says "not
    sampled" is processed and piped on in that same context, with no span built (the piped
    copy carries the upstream's traceparent unchanged); a sampled one gets its spans."""
    provider, exported = spans
    source, out = new_topic(), new_topic()
    unsampled = f"00-{0x11:032x}-{0x22:016x}-00"
    sampled = f"00-{0x33:032x}-{0x44:016x}-01"
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(topic=source, payload=b"quiet", headers=[("traceparent", unsampled)])
        producer.produce_sync(topic=source, payload=b"loud", headers=[("traceparent", sampled)])

    class Forwarder(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                self.pipe_sync(topic=out, message=message)

    app = make_app(kafka_bootstrap, max_messages=1)  # one message, one process span
    app.routes.topic(source, Forwarder)
    app.tracing.enable(tracer_provider=provider)
    with running(app):
        piped = {m.value(): dict(m.headers() or ()) for m in read_messages(out, 2, timeout=30)}
        exported.wait_for(lambda done: any(s.name == f"send {out}" for s in done))
    assert piped[b"quiet"]["traceparent"] == unsampled.encode(), "copied, not a new span's"
    loud = parse_traceparent(piped[b"loud"]["traceparent"])
    assert loud is not None
    assert loud[0] == 0x33
    assert loud[1] != 0x44, "a sampled trace goes on from the send span"
    traces = {s.context.trace_id for s in exported.finished if not s.name.startswith("settle")}
    assert traces == {0x33}, "spans of the sampled trace only (commits are traces of their own)"
    assert {span.name for span in exported.finished} >= {f"process {source}", f"send {out}"}
