"""``ProcessSpan``: the ``process {topic}`` span of one batch, current while ``consume()`` runs
(see :class:`~conveyor.tracing.Tracing`). A batch whose trace is not sampled gets a fresh
unsampled context (or, a message alone, the one it carries on: ``CarriedProcess``) and no
span is built."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from conveyor.tracing import semconv as sc
from conveyor.tracing.sampling import KEPT
from conveyor.tracing.semconv import key_text, mark_failed

if TYPE_CHECKING:
    from conveyor.tracing.tracer import Tracing

__all__ = ["ProcessSpan"]

_log = logging.getLogger("conveyor.tracing")


class ProcessSpan:
    """The ``process {topic}`` span of one batch: current while it is entered; a failure
    recorded with :meth:`failed` keeps it current (so a dead letter sent because of it joins
    the trace) until it is exited."""

    __slots__ = ("_failed", "_token", "cost", "kept", "span", "tracing")

    def __init__(
        self,
        tracing: Tracing,
        topic: str,
        partition: int,
        group: str | None,
        batch: Sequence[Any],
        name: str | None = None,
        remote: Any = False,
    ) -> None:
        """``remote``: what ``Tracing._remote_parent`` read from a batch of one message's
        headers (``False``: the propagator reads them)."""
        api = tracing._api
        assert api is not None
        self.tracing = tracing
        self._failed = False
        self._token: Any = None
        self.kept = False
        """Whether a recording span was built (the trace is sampled)."""
        self.cost = 0.0
        """Seconds spent building and ending the span when it was kept (timed only then: a
        message that is not sampled pays for no clock)."""
        parent = None
        if len(batch) == 1:
            parent = tracing._context_from(remote, batch[0].headers())
        quick = tracing._quick_decision(parent)
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
            self.span = tracing._begin(
                name or f"process {topic}",
                api.SpanKind.CONSUMER,
                attributes,
                links=tracing.links_of(batch),
            )
            self.kept = True
            self.cost = time.perf_counter() - began
            return
        self.span = span = tracing._begin(
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
        api = self.tracing._api
        assert api is not None
        self._token = api.attach(api.in_context(self.span))
        return self

    def failed(self, error: BaseException) -> None:
        """Record ``error`` on the span (``error.type``, the exception event, an error status).
        Never raises: tracing does not get in the way of handling the failure."""
        api = self.tracing._api
        assert api is not None
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
        api = self.tracing._api
        assert api is not None
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
