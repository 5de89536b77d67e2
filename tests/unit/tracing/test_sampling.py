"""Messages whose trace is not sampled: the sampler is asked before a span is built, a dropped
span costs a header copy, and a kept root has the trace id the sampler decided on."""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    TraceIdRatioBased,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from conveyor.messages import Deserializers, Message
from conveyor.tracing import Tracing, carried, headers, tracer
from conveyor.tracing.headers import parse_traceparent
from conveyor.tracing.sampling import RootDraws, RootsOneByOne
from helpers import FakeRaw


def _traced(sampler: Any) -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing()
    tracing.enable(tracer_provider=provider)
    return tracing, exporter


def _traceparent(headers: list[tuple[str, Any]]) -> str:
    (value,) = [value for name, value in headers if name == "traceparent"]
    return str(value)


def _within(span_context: SpanContext) -> Any:
    """Make ``span_context`` the current span's (a token to detach)."""
    return context.attach(trace.set_span_in_context(NonRecordingSpan(span_context)))


UNSAMPLED = SpanContext(0xAB, 0xCD, is_remote=True, trace_flags=TraceFlags(0))
SAMPLED = SpanContext(0xAB, 0xCD, is_remote=True, trace_flags=TraceFlags(1))


def test_a_child_of_an_unsampled_trace_copies_its_context_and_builds_no_span() -> None:
    tracing, exporter = _traced(ParentBased(ALWAYS_ON))
    tracing._tracer.start_span = _refuse  # the SDK is not asked to build anything
    token = _within(UNSAMPLED)
    try:
        headers, finish = tracing.sending("orders", b"k", -1, [("traceparent", "stale")])
    finally:
        context.detach(token)
    assert _traceparent(headers) == f"00-{0xAB:032x}-{0xCD:016x}-00", "the parent's own context"
    assert finish is None
    assert not exporter.get_finished_spans()


def test_a_message_of_an_unsampled_trace_is_processed_in_its_context_without_a_span() -> None:
    tracing, exporter = _traced(ParentBased(ALWAYS_ON))
    tracing._tracer.start_span = _refuse
    raw = FakeRaw(3, [("traceparent", f"00-{0xAB:032x}-{0xCD:016x}-00".encode())])
    with tracing.processing("orders", 0, "g", [raw]):
        current = trace.get_current_span().get_span_context()
        piped, _finish = tracing.sending("audit", None, -1, None)  # produced in consume()
    assert (current.trace_id, current.span_id, current.trace_flags.sampled) == (0xAB, 0xCD, False)
    assert _traceparent(piped) == f"00-{0xAB:032x}-{0xCD:016x}-00"
    assert not exporter.get_finished_spans()


def test_an_unsampled_message_is_processed_over_the_context_that_was_current() -> None:
    """The carried context is set on the ContextVar straight (not through the API's calls):
    it still keeps what the thread's context held, and the exit restores that context."""
    tracing, _exporter = _traced(ParentBased(ALWAYS_ON))
    raw = FakeRaw(3, [("traceparent", f"00-{0xAB:032x}-{0xCD:016x}-00".encode())])
    token = context.attach(baggage.set_baggage("tenant", "t1"))
    try:
        before = context.get_current()
        with tracing.processing("orders", 0, "g", [raw]):
            inside = (baggage.get_baggage("tenant"), trace.get_current_span().get_span_context())
        after = context.get_current()
    finally:
        context.detach(token)
    assert inside[0] == "t1", "the thread's baggage is kept under the carried span"
    assert (inside[1].trace_id, inside[1].span_id) == (0xAB, 0xCD)
    assert after is before


def test_an_unsampled_message_whose_consume_raises_leaves_no_span_and_its_context() -> None:
    """The failure of an unsampled message's ``consume()`` is not recorded anywhere (there is
    no span), and the thread's context is restored as after a clean exit."""
    tracing, exporter = _traced(ParentBased(ALWAYS_ON))
    tracing._tracer.start_span = _refuse
    raw = FakeRaw(3, [("traceparent", f"00-{0xAB:032x}-{0xCD:016x}-00".encode())])
    before = context.get_current()

    def consume_raising() -> None:
        with tracing.processing("orders", 0, "g", [raw]) as run:
            run.failed(ValueError("boom"))  # what the executor does before a dead letter
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        consume_raising()
    assert context.get_current() is before
    assert not exporter.get_finished_spans()


@pytest.mark.parametrize(
    "incoming",
    [f"00-{0xAB:032x}-{0xCD:016x}-00", f"01-{0xAB:032x}-{0xCD:016x}-00-later"],
    ids=["version-00", "a-later-version"],
)
def test_an_unsampled_message_handled_in_its_own_message_span_builds_none(incoming: str) -> None:
    """``message_span`` takes the same path as a batch of one: a message of an unsampled trace
    (of any version, read by the parser when not 00) gets its parent's context, no span."""
    tracing, exporter = _traced(ParentBased(ALWAYS_ON))
    tracing._tracer.start_span = _refuse
    message = Message(FakeRaw(3, [("traceparent", incoming.encode())]), Deserializers())
    with tracing.message_span(message):
        current = trace.get_current_span().get_span_context()
        piped, finish = tracing.sending("audit", None, -1, None)
    assert (current.trace_id, current.span_id, current.trace_flags.sampled) == (0xAB, 0xCD, False)
    assert _traceparent(piped) == f"00-{0xAB:032x}-{0xCD:016x}-00"
    assert finish is None
    assert not exporter.get_finished_spans()


def test_an_unsampled_message_is_carried_on_as_its_header_its_ids_read_only_if_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue's "a header copy": a message of an unsampled trace is taken in by a check of
    its ``traceparent`` and sent on as that same header; the ids are parsed only when user
    code asks for the current span's context."""
    parsed: list[object] = []

    def counting(value: object) -> object:
        parsed.append(value)
        return parse_traceparent(value)  # type: ignore[arg-type]

    monkeypatch.setattr(tracer, "parse_traceparent", counting)
    monkeypatch.setattr(carried, "parse_traceparent", counting)
    monkeypatch.setattr(headers, "parse_traceparent", counting)  # traceparent_of's too
    tracing, exporter = _traced(ParentBased(TraceIdRatioBased(0.5)))
    tracing._tracer.start_span = _refuse
    incoming = f"00-{0xAB:032x}-{0xCD:016x}-02"
    raw = FakeRaw(3, [("sent", b"1"), ("traceparent", incoming.encode())])
    with tracing.processing("orders", 0, "g", [raw]):
        piped, finish = tracing.sending("audit", None, -1, [("traceparent", "stale")])
        assert parsed == [], "nothing parsed to take it in and send it on"
        current = trace.get_current_span().get_span_context()
    assert len(parsed) == 1, "parsed once, when asked"
    assert (current.trace_id, current.span_id, current.trace_flags) == (0xAB, 0xCD, 2)
    assert current.is_remote
    assert piped == [("traceparent", incoming)]
    assert finish is None
    assert not exporter.get_finished_spans()


def test_a_sampler_that_keeps_unsampled_children_gets_the_carried_parent_and_its_link() -> None:
    """Under a sampler that records children of unsampled parents, the process span's parent
    and link are the carried header's ids, read when the SDK asks."""
    tracing, exporter = _traced(ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON))
    raw = FakeRaw(3, [("traceparent", f"00-{0xAB:032x}-{0xCD:016x}-00".encode())])
    with tracing.processing("orders", 0, "g", [raw]):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert (span.parent.trace_id, span.parent.span_id, span.parent.is_remote) == (0xAB, 0xCD, True)
    assert isinstance(span.parent.trace_flags, TraceFlags)
    assert not span.parent.trace_flags.sampled
    assert [link.context.span_id for link in span.links] == [0xCD]
    assert span.context.trace_id == 0xAB


def test_a_carried_span_of_a_header_it_cannot_read_has_no_context() -> None:
    assert not carried.CarriedSpan(b"garbage").get_span_context().is_valid


def test_an_unsampled_message_with_baggage_in_consume_sends_the_baggage_on() -> None:
    tracing, _exporter = _traced(ParentBased(ALWAYS_ON))
    incoming = f"00-{0xAB:032x}-{0xCD:016x}-00"
    raw = FakeRaw(3, [("traceparent", incoming.encode())])
    with tracing.processing("orders", 0, "g", [raw]):
        token = context.attach(baggage.set_baggage("tenant", "t1"))
        try:
            piped, _finish = tracing.sending("audit", None, -1, None)
        finally:
            context.detach(token)
    assert dict(piped) == {"traceparent": incoming, "baggage": "tenant=t1"}


def test_a_sampled_parent_still_gets_its_child_spans() -> None:
    tracing, exporter = _traced(ParentBased(ALWAYS_OFF))  # roots dropped, children of sampled kept
    token = _within(SAMPLED)
    try:
        headers, finish = tracing.sending("orders", None, -1, None)
    finally:
        context.detach(token)
    assert finish is not None
    finish(None, FakeRaw(9))
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert span.parent.span_id == 0xCD
    assert _traceparent(headers) == f"00-{0xAB:032x}-{span.context.span_id:016x}-01"


def test_a_sampler_that_keeps_unsampled_children_is_asked_and_obeyed() -> None:
    """Only ParentBased's default drops an unsampled parent's children without asking: a
    sampler that samples everything gets its span."""
    tracing, exporter = _traced(ALWAYS_ON)
    token = _within(UNSAMPLED)
    try:
        _headers, finish = tracing.sending("orders", None, -1, None)
    finally:
        context.detach(token)
    assert finish is not None
    finish(None, FakeRaw(1))
    assert len(exporter.get_finished_spans()) == 1


def test_a_dropped_root_is_decided_without_a_span_and_still_carries_a_context() -> None:
    tracing, exporter = _traced(ParentBased(ALWAYS_OFF))
    tracing._tracer.start_span = _refuse
    headers, finish = tracing.sending("orders", None, -1, None)
    version, trace_id, span_id, flags = _traceparent(headers).split("-")
    assert (version, int(flags, 16) & 1) == ("00", 0), "unsampled, so downstream drops it too"
    assert int(flags, 16) & 2 == 2, "a random trace id, flagged as the SDK flags it"
    assert int(trace_id, 16)
    assert int(span_id, 16)
    assert finish is None
    assert not exporter.get_finished_spans()


def test_a_dropped_batch_root_is_decided_without_a_span() -> None:
    """A batch of several messages has no parent: its ``process`` span is a root, decided by
    the sampler's trace id alone when it drops it."""
    tracing, exporter = _traced(ParentBased(ALWAYS_OFF))
    tracing._tracer.start_span = _refuse
    batch = [
        FakeRaw(offset, [("traceparent", f"00-{0xAB:032x}-{0xCD:016x}-01".encode())])
        for offset in (1, 2)
    ]
    with tracing.processing("orders", 0, "g", batch):
        current = trace.get_current_span().get_span_context()
    assert current.is_valid
    assert not current.trace_flags.sampled
    assert not current.is_remote, "a root of this process (a sampler tells local from remote)"
    assert not exporter.get_finished_spans()


def test_a_ratio_sampler_keeps_its_rate_for_batch_roots() -> None:
    """As for a send: the trace id Conveyor decided on is the one the SDK's span gets, so the
    ratio sampler's rate is kept (not squared) for ``process`` spans of whole batches."""
    tracing, exporter = _traced(ParentBased(TraceIdRatioBased(0.5)))
    batch = [FakeRaw(1), FakeRaw(2)]
    for _ in range(2000):
        with tracing.processing("orders", 0, "g", batch):
            pass
    spans = exporter.get_finished_spans()
    assert 800 <= len(spans) <= 1200, f"{len(spans)} of 2000 kept at a rate of 0.5"


def test_tracing_enabled_again_keeps_one_hand_over_of_trace_ids() -> None:
    """The SDK hands back the same tracer each time: enabling again must not wrap its id
    generator again (each wrap was a thread-local more, and a call more for every root)."""
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)))
    tracing = Tracing()
    for _ in range(3):
        tracing.enable(tracer_provider=provider)
        tracing.disable()
    tracing.enable(tracer_provider=provider)
    generator = tracing._tracer.id_generator
    assert type(generator) is tracer.HandedIds
    assert type(generator._inner) is not tracer.HandedIds
    headers, _ = tracing.sending("orders", None, -1, None)
    assert parse_traceparent(_traceparent(headers)) is not None


class _OwnRatio(TraceIdRatioBased):
    """A sampler Conveyor does not read itself (not the SDK's own class): it is asked."""


class _OwnRandomIds(RandomIdGenerator):
    """An id generator of the user's own (random, but not the SDK's class): called per root."""


@pytest.mark.parametrize(
    ("ratio", "ids"),
    [
        (TraceIdRatioBased, RandomIdGenerator),
        (TraceIdRatioBased, _OwnRandomIds),
        (_OwnRatio, RandomIdGenerator),
    ],
    ids=["read-drawn-ahead", "read-one-by-one", "asked"],
)
def test_a_ratio_sampler_keeps_its_rate_and_its_decisions_trace_id(ratio: type, ids: type) -> None:
    """The root's trace id is drawn before the span: a kept root must get that same id, or the
    SDK would decide again on another one (the rate would be squared). Conveyor reads the
    SDK's ratio sampler's decision itself (its roots drawn ahead from the SDK's own ids, one
    by one from any other generator), and asks any other sampler."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(ratio(0.5)), id_generator=ids())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing()
    tracing.enable(tracer_provider=provider)
    deciding = (
        None if ratio is _OwnRatio else RootDraws if ids is RandomIdGenerator else RootsOneByOne
    )
    assert type(tracing._roots) is (type(None) if deciding is None else deciding)
    written = []
    for _ in range(2000):
        headers, finish = tracing.sending("orders", None, -1, None)
        written.append(int(_traceparent(headers).split("-")[1], 16))
        if finish is not None:
            finish(None, FakeRaw(0))
    spans = exporter.get_finished_spans()
    assert 800 <= len(spans) <= 1200, f"{len(spans)} of 2000 kept at a rate of 0.5"
    kept = {span.context.trace_id for span in spans}
    assert kept <= set(written), "each kept span has the trace id its header carries"
    sampler = TraceIdRatioBased(0.5)
    assert all(sampler.should_sample(None, t, "x").decision.is_sampled() for t in kept)


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    pytest.fail("a span was built for a message whose trace is not sampled")


def test_a_sampler_conveyor_does_not_read_is_asked_once_per_span() -> None:
    """Samplers that count or limit (rate limiters, remote samplers) must be asked once a
    span, as the SDK asks them, not once by Conveyor and once by the SDK."""

    class Counting(TraceIdRatioBased):
        asked = 0

        def should_sample(self, *args: Any, **kwargs: Any) -> Any:
            Counting.asked += 1
            return super().should_sample(*args, **kwargs)

    tracing, _exporter = _traced(ParentBased(Counting(0.5)))
    for _ in range(100):
        _headers, finish = tracing.sending("orders", None, -1, None)
        if finish is not None:
            finish(None, FakeRaw(0))
    assert Counting.asked == 100


def test_a_sampler_built_from_the_environment_is_read_too() -> None:
    """``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` builds ParentBasedTraceIdRatio, a
    subclass the SDK only gives a root: its decisions are read like ParentBased's."""
    tracing, exporter = _traced(ParentBasedTraceIdRatio(0.0))
    tracing._tracer.start_span = _refuse
    _headers, finish = tracing.sending("orders", None, -1, None)  # a root: dropped by its id
    token = _within(UNSAMPLED)
    try:
        child, child_finish = tracing.sending("orders", None, -1, None)  # dropped on the flag
    finally:
        context.detach(token)
    assert (finish, child_finish) == (None, None)
    assert _traceparent(child) == f"00-{0xAB:032x}-{0xCD:016x}-00"
    assert not exporter.get_finished_spans()


def test_roots_drawn_ahead_are_each_a_valid_context_of_their_own() -> None:
    """The SDK's random ids are drawn for many roots at once: each root still gets a trace id
    and a span id of its own, valid, and flagged as the SDK flags them."""
    tracing, _exporter = _traced(ParentBased(ALWAYS_OFF))
    assert type(tracing._roots) is RootDraws, "the SDK's own generator: drawn in bulk"
    sent = [_traceparent(tracing.sending("orders", None, -1, None)[0]) for _ in range(1000)]
    assert len(set(sent)) == 1000
    assert len({value.split("-")[2] for value in sent}) == 1000, "span ids of their own"
    for value in sent:
        parsed = parse_traceparent(value)
        assert parsed is not None
        assert parsed[2] == TraceFlags.RANDOM_TRACE_ID


class _CountingIds(IdGenerator):
    """An id generator of the user's own: trace ids 1, 2, 3 ..., span ids 7."""

    def __init__(self) -> None:
        self.next_id = 0

    def generate_trace_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def generate_span_id(self) -> int:
        return 7


def test_an_id_generator_of_the_users_own_is_asked_for_each_root() -> None:
    """A generator other than the SDK's random one may put meaning in its ids (a time, say):
    it is called for each root, never drawn from ahead."""
    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF), id_generator=_CountingIds())
    tracing = Tracing()
    tracing.enable(tracer_provider=provider)
    assert type(tracing._roots) is RootsOneByOne, "called for each root"
    sent = [_traceparent(tracing.sending("orders", None, -1, None)[0]) for _ in range(3)]
    assert sent == [f"00-{n:032x}-{7:016x}-00" for n in (1, 2, 3)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_roots_drawn_ahead_are_not_sent_again_by_a_forked_child() -> None:
    """A forked worker (gunicorn, multiprocessing) must not send the roots its parent drew
    before the fork: every trace id would go out twice."""
    tracing, _exporter = _traced(ParentBased(ALWAYS_OFF))
    tracing.sending("orders", None, -1, None)  # roots drawn ahead, waiting in the parent
    reading, writing = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of a fork with threads running
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe and exits at once
        try:
            report = _traceparent(tracing.sending("orders", None, -1, None)[0])
        except BaseException as error:
            report = f"the child failed: {error!r}"
        try:
            os.write(writing, report.encode())
        finally:
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        in_child = pipe.read().decode()
    os.waitpid(child, 0)
    in_parent = _traceparent(tracing.sending("orders", None, -1, None)[0])
    assert parse_traceparent(in_child) is not None, in_child
    assert in_child.split("-")[1] != in_parent.split("-")[1]


def test_roots_drawn_for_one_sampler_are_not_decided_by_the_next() -> None:
    """Enabled again with another provider, tracing decides roots by the new sampler: the
    roots drawn ahead for the old one (all kept, here) are dropped with it, also when the new
    provider's ids are not drawn ahead at all (an id generator of the user's own)."""
    tracing, _exporter = _traced(ParentBased(ALWAYS_ON))
    _headers, finish = tracing.sending("orders", None, -1, None)  # drawn ahead: all kept
    assert finish is not None
    finish(None, FakeRaw(0))
    tracing.enable(
        tracer_provider=TracerProvider(sampler=ParentBased(ALWAYS_OFF), id_generator=_CountingIds())
    )
    tracing._tracer.start_span = _refuse
    for number in (1, 2, 3):
        headers, finish = tracing.sending("orders", None, -1, None)
        assert finish is None
        assert _traceparent(headers) == f"00-{number:032x}-{7:016x}-00", "the new ids, dropped"
