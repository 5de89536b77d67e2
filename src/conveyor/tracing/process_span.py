"""``ProcessSpan``: the ``process {topic}`` span of one batch, current while ``consume()`` runs
(see :class:`~conveyor.tracing.Tracing`). A batch whose trace is not sampled gets a fresh
unsampled context (or, a message alone, the one it carries on: ``CarriedProcess``) and no
span is built. What it asks of the tracer is :class:`SpanDecisions`."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.tracing import semconv as sc
from conveyor.tracing.sampling import KEPT
from conveyor.tracing.semconv import key_text, mark_failed

if TYPE_CHECKING:
    from conveyor.tracing.otel import OtelApi

__all__ = ["ProcessSpan", "SpanDecisions"]

_log = logging.getLogger("conveyor.tracing")


class SpanDecisions(Protocol):
    """What a :class:`ProcessSpan` asks of its tracer (:class:`~conveyor.tracing.Tracing`):
    the context a lone message carries, the sampler's decision where it can be read without
    asking the sampler, starting a span, and the links to a batch's messages."""

    def context_from(self, remote: Any, headers: Sequence[tuple[str, Any]] | None) -> Any:
        """The context of what was read from a lone message's ``headers`` (``remote``)."""

    def quick_decision(self, context: Any = None) -> Any:
        """A span to carry on (not sampled), ``KEPT`` (a root kept), or None (ask)."""

    def start_span(
        self,
        name: str,
        kind: Any,
        attributes: dict[str, Any],
        context: Any = None,
        links: Sequence[Any] | None = None,
    ) -> Any:
        """A span started through the SDK."""

    def link(self, span: Any, batch: Sequence[Any]) -> None:
        """Link a recorded ``span`` to the creation context of each message of ``batch``."""

    def links_of(self, batch: Sequence[Any]) -> list[Any]:
        """The links to the creation context of each message of ``batch``."""


class ProcessSpan:
    """The ``process {topic}`` span of one batch: current while it is entered; a failure
    recorded with :meth:`failed` keeps it current (so a dead letter sent because of it joins
    the trace) until it is exited."""

    __slots__ = ("_api", "_failed", "_token", "cost", "kept", "span")

    def __init__(
        self,
        tracing: SpanDecisions,
        api: OtelApi,
        topic: str,
        partition: int,
        group: str | None,
        batch: Sequence[Any],
        name: str | None = None,
        remote: Any = False,
    ) -> None:
        """``api``: the tracer's OpenTelemetry names; ``remote``: what the tracer read from a
        batch of one message's headers (``False``: the propagator reads them)."""
        self._api = api
        self._failed = False
        self._token: Any = None
        self.kept = False
        """Whether a recording span was built (the trace is sampled)."""
        self.cost = 0.0
        """Seconds spent building and ending the span when it was kept (timed only then: a
        message that is not sampled pays for no clock)."""
        parent = None
        if len(batch) == 1:
            parent = tracing.context_from(remote, batch[0].headers())
        quick = tracing.quick_decision(parent)
        if quick is not None and quick is not KEPT:  # not sampled: carried on, nothing built
            self.span = quick
            return
        began = time.perf_counter()
        attributes: dict[str, Any] = {
            sc.SYSTEM: sc.KAFKA,
            sc.DESTINATION: topic,
            sc.PARTITION: str(partition),
            sc.OPERATION_TYPE: "process",
            sc.OPERATION_NAME: "process",
            sc.BATCH_COUNT: len(batch),
        }
        if group is not None:
            attributes[sc.CONSUMER_GROUP] = group
        if parent is not None:
            raw = batch[0]
            attributes[sc.OFFSET] = raw.offset()
            key = raw.key()
            if key is not None:
                attributes[sc.KEY] = key_text(key)
        if quick is KEPT and parent is None:
            # a batch's root the sampler keeps: its links go in with it (the SDK takes a list
            # at start for a fraction of what adding them one by one costs)
            self.span = tracing.start_span(
                name or f"process {topic}",
                api.SpanKind.CONSUMER,
                attributes,
                links=tracing.links_of(batch),
            )
            self.kept = True
            self.cost = time.perf_counter() - began
            return
        self.span = span = tracing.start_span(
            name or f"process {topic}", api.SpanKind.CONSUMER, attributes, parent
        )
        self.kept = kept = span.is_recording()
        if not kept:
            pass  # sampled out: no links (the SDK would drop them), nothing more to build
        elif parent is None:
            tracing.link(span, batch)
        else:  # the one message's context was read already: link to it
            creation = api.trace.get_current_span(parent).get_span_context()
            if creation.is_valid:
                span.add_link(creation)
        if kept:
            self.cost = time.perf_counter() - began

    def __enter__(self) -> ProcessSpan:
        api = self._api
        self._token = api.attach(api.in_context(self.span))
        return self

    def failed(self, error: BaseException) -> None:
        """Record ``error`` on the span (``error.type``, the exception event, an error status).
        Never raises: tracing does not get in the way of handling the failure."""
        api = self._api
        self._failed = True
        try:
            self.span.record_exception(error)
            mark_failed(api, self.span, type(error).__qualname__, error)
        except Exception:
            _log.exception("could not record a failure on a process span")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        api = self._api
        kept = self.kept
        began = time.perf_counter() if kept else 0.0
        if value is not None and not self._failed:
            self.failed(value)
        try:
            try:
                api.detach(self._token)
            finally:
                self.span.end()
        except Exception:  # never raises into the worker: the batch is done either way
            _log.exception("could not end a process span")
        if kept:
            self.cost += time.perf_counter() - began
