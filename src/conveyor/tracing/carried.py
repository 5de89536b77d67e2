"""``CarriedSpan``: the context of a message whose trace is not sampled, kept as the
``traceparent`` header it came in, and ``CarriedProcess``: the processing of such a message
(OpenTelemetry's API is imported: load this module only once tracing is enabled).

Under ``ParentBased``'s defaults a child of an unsampled parent is dropped, so the parent's
context is all there is to carry on to what ``consume()`` sends. Kept as its header, it costs a
header check to take in and a header copy to send on; its ids are read only if something asks
for them (user code reading the current span, a propagator other than the plain W3C one).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

from opentelemetry.trace import INVALID_SPAN_CONTEXT, NonRecordingSpan, SpanContext, TraceFlags

from conveyor.tracing.headers import parse_traceparent

__all__ = ["CarriedProcess", "CarriedSpan", "ContextCalls"]


class CarriedSpan(NonRecordingSpan):
    """A non-recording span read from ``header`` (a version ``00`` ``traceparent`` whose
    sampled flag is clear, checked by :func:`~conveyor.tracing.headers.unsampled_traceparent`)
    when first asked: a remote parent as it came, or (``remote=False``) a root of this process
    the sampler dropped, kept as the header it sends."""

    def __init__(self, header: str | bytes, remote: bool = True) -> None:
        self.header = header
        self.remote = remote
        self._context: SpanContext | None = None  # type: ignore[assignment]

    def get_span_context(self) -> SpanContext:
        context = self._context
        if context is None:
            parsed = parse_traceparent(self.header)
            if parsed is None:  # not one unsampled_traceparent accepts: no context, as for any
                context = self._context = INVALID_SPAN_CONTEXT  # malformed traceparent
            else:
                trace_id, span_id, flags = parsed
                context = self._context = SpanContext(
                    trace_id, span_id, is_remote=self.remote, trace_flags=TraceFlags(flags)
                )
        return context

    def traceparent(self) -> str:
        """The header to send on: the one that came (as text)."""
        header = self.header
        return header if isinstance(header, str) else header.decode("ascii")

    def __repr__(self) -> str:
        return f"CarriedSpan({self.header!r}, remote={self.remote})"


class ContextCalls(Protocol):
    """What :class:`CarriedProcess` needs of the tracer's OpenTelemetry names (its ``OtelApi``):
    making the current context with a span in it, and setting and resetting it."""

    attach: Callable[[Any], Any]
    detach: Callable[[Any], None]

    def in_context(self, span: Any) -> Any: ...


class CarriedProcess:
    """The processing of a lone message whose trace is not sampled (its parent's sampled flag
    is clear, under ParentBased's default for such a parent): while it is entered, the
    parent's context is current (what ``consume()`` sends carries it on), and no span is
    built. It stands where a :class:`~conveyor.tracing.ProcessSpan` would, with a fraction of
    its work: this is the path of nearly every message when few traces are sampled."""

    __slots__ = ("_api", "_token", "span")

    kept = False
    """No recording span was built (see ``ProcessSpan.kept``)."""
    cost = 0.0

    def __init__(self, api: ContextCalls, span: NonRecordingSpan) -> None:
        self._api = api
        self.span = span
        """The parent's span, non-recording (what ``get_current_span()`` gives inside)."""
        self._token: Any = None

    def __enter__(self) -> CarriedProcess:
        api = self._api
        self._token = api.attach(api.in_context(self.span))
        return self

    def failed(self, error: BaseException) -> None:
        """Nothing to record: the trace is not sampled."""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._api.detach(self._token)
