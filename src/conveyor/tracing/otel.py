"""``OtelApi``: the OpenTelemetry names the tracer and its spans use, imported once, when
tracing is enabled (the extra ``conveyor[otel]`` is optional: its absence is reported then).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = ["INSTALL_HINT", "OtelApi", "load_api"]

INSTALL_HINT = "pip install 'conveyor[otel]'"


class OtelApi:
    """The OpenTelemetry names Conveyor uses, imported once, at ``Tracing.enable()``."""

    def __init__(self) -> None:
        # Imported here: the extra is optional, and its absence is reported at enable().
        from opentelemetry import baggage, context, propagate, trace  # noqa: PLC0415
        from opentelemetry.trace import (  # noqa: PLC0415
            Link,
            NonRecordingSpan,
            SpanContext,
            SpanKind,
            Status,
            StatusCode,
            TraceFlags,
        )

        self.baggage = baggage
        self.context = context
        self.Link = Link
        self.NonRecordingSpan = NonRecordingSpan
        self.propagate = propagate
        self.trace = trace
        self.SpanContext = SpanContext
        self.SpanKind = SpanKind
        self.Status = Status
        self.StatusCode = StatusCode
        self.TraceFlags = TraceFlags
        from conveyor.tracing.carried import CarriedProcess, CarriedSpan  # noqa: PLC0415

        # (carried.py imports the API itself: loaded here, once the API is known to be there)
        self.CarriedSpan = CarriedSpan
        self.CarriedProcess = CarriedProcess
        self.flags = tuple(TraceFlags(value) for value in range(256))
        """Every ``TraceFlags`` value, made once (a batch's links read one per message)."""
        self.span_key: str = next(
            iter(trace.set_span_in_context(trace.INVALID_SPAN, context.Context()))
        )
        """The key of the current span in a context (made unique per process by the API)."""
        # The per-message paths read, set and reset the current context straight on the
        # ContextVar of the API's default runtime context (two calls fewer each, ~0.1 us of a
        # ~1 us path); any other runtime context goes through the API.
        var = _context_var(context)
        self.current: Callable[[], Any] = var.get if var is not None else context.get_current
        self.attach: Callable[[Any], Any] = var.set if var is not None else context.attach
        self.detach: Callable[[Any], None] = var.reset if var is not None else context.detach

    def in_context(self, span: Any) -> Any:
        """``trace.set_span_in_context(span)``: the current context with ``span`` as its span."""
        values = self.current()
        if not values:
            return self.context.Context({self.span_key: span})
        return self.trace.set_span_in_context(span, values)


def _context_var(context: Any) -> ContextVar[Any] | None:
    """The ContextVar that OpenTelemetry's default runtime context keeps the current context
    in, or None when another runtime context is configured (``OTEL_PYTHON_CONTEXT``)."""
    try:
        from opentelemetry.context.contextvars_context import (  # noqa: PLC0415
            ContextVarsRuntimeContext,
        )
    except ImportError:
        return None
    runtime = getattr(context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if type(runtime) is ContextVarsRuntimeContext and isinstance(var, ContextVar):
        return var
    return None


def load_api() -> OtelApi:
    """The OpenTelemetry names Conveyor uses.

    Raises:
        ConfigurationError: OpenTelemetry's API is not installed (``conveyor[otel]``).
    """
    try:
        return OtelApi()
    except ImportError as exc:
        raise ConfigurationError(
            f"tracing needs OpenTelemetry's API, which is not installed ({exc}): {INSTALL_HINT}",
            "tracing",
        ) from None
