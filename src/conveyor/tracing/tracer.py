"""``Tracing`` (``app.tracing``): OpenTelemetry spans and W3C trace context on every hop.

* **send** — every message a traced producer sends gets a ``send {topic}`` span (PRODUCER
  kind) whose context travels in the message's ``traceparent`` / ``tracestate`` / ``baggage``
  headers. The span ends when librdkafka reports the delivery, not when ``produce()``
  returns, and a failed delivery ends it with ``error.type``.
* **process** — each ``consume()`` runs inside a ``process {topic}`` span (CONSUMER kind) that
  links to the creation context of every message of its batch (up to ``max_links``) and, for
  a batch of one, is that message's child; it is the current span while ``consume()`` runs,
  so whatever ``consume()`` produces (a pipe, a reply, a dead letter) continues the trace.
* **settle** — each offset commit of a listener is a ``settle {topic}`` span.

With tracing off (the default) producers add nothing to headers and processing runs no
tracing code beyond one attribute check per batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from conveyor._version import __version__
from conveyor.errors import ConfigurationError
from conveyor.instrumentation import events as ev
from conveyor.messages import record_of
from conveyor.producer.hooks import SendHookSwitch
from conveyor.tracing import semconv as sc
from conveyor.tracing.headers import (
    CONTEXT_HEADERS,
    TRACEPARENT,
    HeadersGetter,
    HeadersSetter,
    format_traceparent,
    parse_traceparent,
    traceparent_of,
    unsampled_traceparent,
    without_context,
)
from conveyor.tracing.otel import OtelApi, load_api
from conveyor.tracing.process_span import ProcessSpan
from conveyor.tracing.sampling import (
    KEPT,
    HandedIds,
    RootDecider,
    drops_unsampled_children,
    root_decider,
)
from conveyor.tracing.semconv import error_type, key_text, mark_failed
from conveyor.tracing.sink_spans import SinkSpans, sink_attributes

if TYPE_CHECKING:
    from conveyor.instrumentation import Event, Monitor
    from conveyor.producer import Producer
    from conveyor.tracing.carried import CarriedProcess

__all__ = ["ProcessSpan", "Tracing"]

_log = logging.getLogger("conveyor.tracing")
_GETTER = HeadersGetter()
_SETTER = HeadersSetter()
_NONE = object()  # _remote_parent: no traceparent header seen yet


def _plain_w3c(propagator: Any) -> bool:
    """Whether ``propagator`` is OpenTelemetry's default (W3C trace context, then baggage):
    Conveyor then reads and writes ``traceparent`` itself, several times faster."""
    fields = getattr(propagator, "fields", None)
    inner = getattr(propagator, "_propagators", None)
    return (
        fields == {"traceparent", "tracestate", "baggage"}
        and isinstance(inner, list | tuple)
        and [type(item).__name__ for item in inner]
        == ["TraceContextTextMapPropagator", "W3CBaggagePropagator"]
    )


class Tracing:
    """OpenTelemetry tracing for an app's producers and consumers (``app.tracing``).

    Example::

        app.tracing.enable()                       # the global tracer provider
        app.tracing.enable(tracer_provider=mine)   # or a provider of your own

    A producer made outside the app is traced with ``app.tracing.attach(producer)``.
    """

    def __init__(self, monitor: Monitor | None = None) -> None:
        self.enabled = False
        self.max_links = 128
        self._api: OtelApi | None = None
        self._tracer: Any = None
        self._sampler: Any = None
        self._drops_unsampled = False
        self._roots: RootDecider | None = None  # roots decided before any span (or None: asked)
        self._propagator: Any = None
        self._fast = False
        self._quick_roots: RootDecider | None = None  # _roots, when sending() writes headers
        self._monitor = monitor
        self._unsubscribe: Callable[[], None] | None = None
        self._sending = SendHookSwitch(self)
        self._lock = threading.Lock()

    # -- switching ----------------------------------------------------------------------------

    def enable(
        self,
        tracer_provider: Any = None,
        *,
        propagator: Any = None,
        max_links: int = 128,
    ) -> None:
        """Trace every produce and consume from now on.

        Args:
            tracer_provider: where spans go (default: OpenTelemetry's global provider).
            propagator: how context is written to and read from headers (default: the global
                one, W3C trace context and baggage unless configured otherwise).
            max_links: the most messages of one batch a ``process`` span links to (the SDK
                keeps at most ``OTEL_SPAN_LINK_COUNT_LIMIT`` links, 128 by default: raise both
                to link larger batches).

        Raises:
            ConfigurationError: OpenTelemetry's API is not installed (``conveyor[otel]``), or
                ``max_links`` is not a non-negative integer.
        """
        if isinstance(max_links, bool) or not isinstance(max_links, int) or max_links < 0:
            raise ConfigurationError(
                f"max_links must be an integer >= 0, got {max_links!r}", "max_links"
            )
        api = load_api()

        provider = tracer_provider or api.trace.get_tracer_provider()
        with self._lock:
            self._quick_roots = None  # a send meanwhile takes the general path, not half of this
            self._api = api
            self._tracer = tracer = provider.get_tracer("conveyor", __version__)
            # An SDK tracer (this instance is Conveyor's own): its sampler is asked first, so
            # that a span it drops is never built (see start_span).
            self._sampler = getattr(tracer, "sampler", None)
            ids = getattr(tracer, "id_generator", None)
            handed: HandedIds | None = None
            if self._sampler is not None and ids is not None:
                # The SDK hands back the same tracer for the same name: enabled again (or by
                # another app on the same provider), its generator is wrapped already.
                if type(ids) is not HandedIds:
                    ids = tracer.id_generator = HandedIds(ids)
                handed = ids
            self._drops_unsampled = drops_unsampled_children(self._sampler)
            random_ids = handed is not None and handed.is_trace_id_random()
            flags = api.TraceFlags.RANDOM_TRACE_ID if random_ids else 0  # as the SDK flags roots
            # One object, set once: a root is never decided by one sampler's bound and another's
            # draws, even by a send while this runs.
            self._roots = roots = root_decider(self._sampler, handed, flags)
            self._propagator = propagator or api.propagate.get_global_textmap()
            self._fast = _plain_w3c(self._propagator)
            self._quick_roots = roots if self._fast else None
            self.max_links = max_links
            self.enabled = True
            self._sending.switch(True)
            if self._monitor is not None and self._unsubscribe is None:
                self._unsubscribe = self._monitor.subscribe(ev.OFFSETS_COMMITTED, self._settled)

    def disable(self) -> None:
        """Stop tracing (spans already started still end)."""
        with self._lock:
            self.enabled = False
            self._sending.switch(False)
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None

    def attach(self, producer: Producer) -> None:
        """Trace what ``producer`` sends while tracing is enabled."""
        self._sending.attach(producer)

    # -- producing (a producer's send hook) -----------------------------------------------------

    def sending(
        self, topic: str, key: Any, partition: int, headers: list[tuple[str, Any]] | None
    ) -> tuple[list[tuple[str, Any]], Callable[[Any, Any], None] | None]:
        """Start the ``send`` span of one message: its headers with the span's context, and
        what ends the span on the delivery report."""
        api = self._api
        if api is None:
            return list(headers or ()), None
        roots = self._quick_roots
        if roots is not None and not api.current():
            # No current span nor baggage: a root, decided by its trace id alone (the common
            # case of a producer called outside any span), its context written directly.
            dropped = roots.dropped()
            if dropped is not None:
                carrier = without_context(headers)
                carrier.append((TRACEPARENT, dropped))
                return carrier, None
            quick: Any = KEPT
        else:
            quick = self.quick_decision()
        if quick is not None and quick is not KEPT:  # not sampled: its context, nothing built
            return self._carry(quick, headers), None
        attributes: dict[str, Any] = {
            sc.SYSTEM: sc.KAFKA,
            sc.DESTINATION: topic,
            sc.OPERATION_TYPE: "send",
            sc.OPERATION_NAME: "send",
        }
        if key is not None:
            attributes[sc.KEY] = key_text(key)
        if partition >= 0:
            attributes[sc.PARTITION] = str(partition)
        span = self.start_span(f"send {topic}", api.SpanKind.PRODUCER, attributes)
        try:
            carrier = self._carry(span, headers)
        except BaseException:
            span.end()
            raise
        if not span.is_recording():
            # Sampled out (or no SDK): nothing to record on the report, so it ends now and
            # adds no callback of its own to the message.
            span.end()
            return carrier, None

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                span.set_attribute(sc.PARTITION, str(message.partition()))
                span.set_attribute(sc.OFFSET, message.offset())
            else:
                mark_failed(api, span, error_type(error), error)
            span.end()

        return carrier, delivered

    def quick_decision(self, context: Any = None) -> Any:
        """The sampler's decision where it can be read without asking it (and without any
        attributes): a non-recording span to carry on when the span would be dropped, ``KEPT``
        when a root is kept (its trace id handed to the SDK: pass it to :meth:`start_span`), or
        None (ask the sampler). A child of an unsampled parent under ParentBased's default is
        dropped on its flag; a root under a ratio (or always on/off) root sampler is decided by
        its trace id as that sampler does."""
        api = self._api
        assert api is not None
        roots = self._roots
        if not self._drops_unsampled and roots is None:
            return None
        current = api.trace.get_current_span(context)
        if type(current) is api.CarriedSpan and self._drops_unsampled:
            return current  # an unsampled parent, carried on as its header came
        parent = current.get_span_context()
        if parent.is_valid:
            if self._drops_unsampled and not parent.trace_flags.sampled:
                return current if not current.is_recording() else api.NonRecordingSpan(parent)
            return None
        if roots is None:
            return None
        dropped = roots.dropped()
        if dropped is None:
            return KEPT
        return api.CarriedSpan(dropped, remote=False)

    def start_span(
        self,
        name: str,
        kind: Any,
        attributes: dict[str, Any],
        context: Any = None,
        links: Sequence[Any] | None = None,
    ) -> Any:
        """Start a span through the SDK: its sampler decides (once), unless
        :meth:`quick_decision` decided already (then a root's trace id is handed over)."""
        return self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, links=links
        )

    def _carry(self, span: Any, headers: list[tuple[str, Any]] | None) -> list[tuple[str, Any]]:
        """``headers`` with ``span``'s context (and the current baggage) instead of theirs."""
        api = self._api
        assert api is not None
        carrier = without_context(headers)
        if type(span) is api.CarriedSpan and self._fast and not api.baggage.get_all():
            carrier.append((TRACEPARENT, span.traceparent()))  # a header copy
            return carrier
        context = span.get_span_context()
        if not context.is_valid:
            pass  # a non-recording tracer (no SDK): there is no context to carry
        elif self._fast and not api.baggage.get_all():
            carrier.append(
                (
                    TRACEPARENT,
                    format_traceparent(context.trace_id, context.span_id, context.trace_flags),
                )
            )
            if context.trace_state:
                carrier.append(("tracestate", context.trace_state.to_header()))
        else:
            self._propagator.inject(
                carrier, context=api.trace.set_span_in_context(span), setter=_SETTER
            )
        return carrier

    # -- consuming ------------------------------------------------------------------------------

    def processing(
        self, topic: str, partition: int, group: str, batch: Sequence[Any]
    ) -> ProcessSpan | CarriedProcess:
        """The ``process`` span of one batch of raw messages (enter it around ``consume()``):
        a lone message whose trace is not sampled gets its parent's context, and no span."""
        return self._processing(topic, partition, group, batch, None)

    def _processing(
        self,
        topic: str,
        partition: int,
        group: str | None,
        batch: Sequence[Any],
        name: str | None,
    ) -> ProcessSpan | CarriedProcess:
        """What :meth:`processing` and :meth:`message_span` give: a lone message's headers
        are read once, here, and what was read goes on to the ``ProcessSpan``."""
        api = self._api
        assert api is not None
        remote: Any = False
        if len(batch) == 1 and self._fast:
            remote = self._remote_parent(batch[0].headers())
            if (
                remote
                and self._drops_unsampled
                and (
                    type(remote) is api.CarriedSpan  # unsampled: checked, its ids not read
                    or not remote.get_span_context().trace_flags.sampled
                )
            ):
                # a child of an unsampled parent, dropped on its flag: nothing is built
                return api.CarriedProcess(api, remote)
        return ProcessSpan(self, api, topic, partition, group, batch, name, remote)

    def message_span(
        self, message: Any, name: str | None = None
    ) -> AbstractContextManager[ProcessSpan | CarriedProcess | None]:
        """A ``process`` span (or one named ``name``) around the handling of one consumed
        :class:`~conveyor.Message` of a batch, child of that message's creation context::

            for message in self.messages:
                with self.app.tracing.message_span(message):
                    handle(message)        # what it produces continues the message's trace

        A no-op (entering gives ``None``) while tracing is off."""
        if not self.enabled:
            return nullcontext()
        raw = record_of(message)
        return self._processing(raw.topic(), raw.partition(), None, [raw], name)

    def context_of(self, raw: Any) -> Any:
        """The OpenTelemetry context carried in a raw message's headers (empty if none or
        malformed: a new trace starts)."""
        headers = raw.headers()
        return self.context_from(self._remote_parent(headers) if self._fast else False, headers)

    def context_from(self, remote: Any, headers: Sequence[tuple[str, Any]] | None) -> Any:
        """The context of what :meth:`_remote_parent` read from ``headers`` (``False``: the
        propagator reads them)."""
        api = self._api
        assert api is not None
        if remote is None:
            return api.context.Context()
        if remote is False:
            return self._propagator.extract(headers, getter=_GETTER)
        return api.trace.set_span_in_context(remote, api.context.Context())

    def _remote_parent(self, headers: Sequence[tuple[str, Any]] | None) -> Any:
        """With the plain W3C propagator, the span of the (last) ``traceparent`` in ``headers``
        (``None`` for none or a malformed one), read without the propagator; ``False`` when
        the propagator must read them (``tracestate`` or ``baggage`` is there too). An
        unsampled parent is a :class:`~conveyor.tracing.carried.CarriedSpan` (its ids read
        only if asked)."""
        api = self._api
        assert api is not None
        found: Any = _NONE
        for name, value in headers or ():
            if name == TRACEPARENT:
                found = value  # the last one wins, as in Message.headers
            elif name in CONTEXT_HEADERS:
                return False  # tracestate or baggage: the propagator reads them all
        if found is _NONE:
            return None
        if unsampled_traceparent(found):
            return api.CarriedSpan(found)
        parsed = parse_traceparent(found)
        if parsed is None:
            return None
        trace_id, span_id, flags = parsed
        return api.NonRecordingSpan(
            api.SpanContext(trace_id, span_id, is_remote=True, trace_flags=api.flags[flags])
        )

    def link(self, span: Any, batch: Sequence[Any]) -> None:
        """Link ``span`` to the creation context of each message of ``batch`` (up to
        ``max_links``), if it is recorded: a link costs a few microseconds in the SDK, and a
        span sampled out (or a tracer without an SDK) would drop it anyway."""
        if not span.is_recording():
            return
        add_link = span.add_link
        for link in self.links_of(batch):
            add_link(link.context)

    def links_of(self, batch: Sequence[Any]) -> list[Any]:
        """The links to the creation context of each message of ``batch`` (up to
        ``max_links``) that carries one."""
        api = self._api
        assert api is not None
        make_context, flags, make_link = api.SpanContext, api.flags, api.Link
        links: list[Any] = []
        append = links.append
        for raw in batch[: self.max_links]:
            parsed = traceparent_of(raw.headers())
            if parsed is not None:
                trace_id, span_id, trace_flags = parsed
                append(
                    make_link(
                        make_context(
                            trace_id, span_id, is_remote=True, trace_flags=flags[trace_flags]
                        )
                    )
                )
        return links

    # -- sinks ------------------------------------------------------------------------------------

    def sink_handing(
        self,
        topic: str,
        group: str,
        sink: str,
        batch: Sequence[Any],
        polled: Sequence[float],
        handed: float,
    ) -> SinkSpans | None:
        """The spans of a sink's batch of raw messages, per record children of its creation
        context: ``queued {topic}`` (``polled``, per record, → ``handed``) and ``published
        {topic}``, open until the sink acknowledged (``SinkSpans.end``); ``None`` while
        tracing is off. Times are wall-clock seconds."""
        api = self._api
        if api is None or not self.enabled:
            return None
        parents = [self.context_of(raw) for raw in batch]
        attributes = [
            sink_attributes(topic, group, sink, raw.partition(), raw.offset()) for raw in batch
        ]
        return SinkSpans(api, self._tracer, topic, parents, attributes, polled, handed)

    # -- settling ---------------------------------------------------------------------------------

    def _settled(self, event: Event) -> None:
        """A listener committed offsets: one ``settle {topic}`` span per topic."""
        api = self._api
        if api is None or not self.enabled:
            return
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for topic, partition, offset in event["offsets"]:
            by_topic.setdefault(topic, []).append((partition, offset))
        ended = int(event["committed_at"] * 1e9)
        started = ended - int(event["duration"] * 1e9)
        for topic, offsets in by_topic.items():
            attributes: dict[str, Any] = {
                sc.SYSTEM: sc.KAFKA,
                sc.DESTINATION: topic,
                sc.CONSUMER_GROUP: event["group"],
                sc.OPERATION_TYPE: "settle",
                sc.OPERATION_NAME: "commit",
                "conveyor.commit.sync": bool(event["sync"]),
            }
            if len(offsets) == 1:
                attributes[sc.PARTITION] = str(offsets[0][0])
                attributes[sc.OFFSET] = offsets[0][1]
            else:
                attributes["conveyor.commit.offsets"] = [f"{p}@{o}" for p, o in offsets]
            span = self._tracer.start_span(
                f"settle {topic}",
                kind=api.SpanKind.CLIENT,
                attributes=attributes,
                start_time=started,
                context=api.context.Context(),  # a commit belongs to no message's trace
            )
            span.end(end_time=ended)

    # -- RPC ----------------------------------------------------------------------------------------

    def start_call(self, name: str, topic: str) -> Any:
        """The span of one RPC call (CLIENT kind), current until :meth:`end_call`; returns
        ``(span, token)``."""
        api = self._api
        assert api is not None
        span = self._tracer.start_span(
            f"call {name}",
            kind=api.SpanKind.CLIENT,
            attributes={sc.SYSTEM: sc.KAFKA, sc.DESTINATION: topic, "rpc.method": name},
        )
        token = api.context.attach(api.trace.set_span_in_context(span))
        return span, token

    def detach(self, token: Any) -> None:
        assert self._api is not None
        self._api.context.detach(token)

    def end_call(self, span: Any, reply: Any | None, error: BaseException | None) -> None:
        """The call's reply came (or it failed): a ``receive`` span for the reply, child of its
        context, then the call's span ends."""
        api = self._api
        assert api is not None
        if reply is not None:
            receive = self._tracer.start_span(
                f"receive {reply.topic()}",
                kind=api.SpanKind.CONSUMER,
                context=self.context_of(reply),
                attributes={
                    sc.SYSTEM: sc.KAFKA,
                    sc.DESTINATION: reply.topic(),
                    sc.PARTITION: str(reply.partition()),
                    sc.OFFSET: reply.offset(),
                    sc.OPERATION_TYPE: "receive",
                    sc.OPERATION_NAME: "receive",
                },
            )
            receive.end()
        if error is not None:
            mark_failed(api, span, type(error).__qualname__, error)
        span.end()
