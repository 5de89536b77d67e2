"""The trace context a sink passes on with each record it delivers, with tracing on
(``app.tracing.enable()``): :func:`delivery_traceparent`.

While a sink's ``deliver`` runs, each record of the batch has a ``published {topic}`` span, a
child of the record's own trace (see :mod:`conveyor.tracing.sink_spans`). A sink that hands
records on to something that traces too (a browser, a queue, another service) puts the span's
W3C ``traceparent`` beside each record, so that the receiver continues the trace as that
span's child; the Broadcast sink does so in every event it pushes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["delivering", "delivery_traceparent"]

# id(record) -> traceparent, for the batch whose deliver() runs in this context
_DELIVERING: ContextVar[dict[int, str] | None] = ContextVar("conveyor_delivering", default=None)


def delivery_traceparent(record: Message[Any, Any]) -> str | None:
    """The W3C ``traceparent`` of the span delivering ``record`` (its ``published {topic}``
    span), for a sink to pass on with it; ``None`` outside ``deliver``, for a record not of
    the batch being delivered, or with tracing off.

    Example (a sink of your own that forwards records to a service over HTTP)::

        def deliver(self, records):
            for record in records:
                traceparent = delivery_traceparent(record)
                headers = {"traceparent": traceparent} if traceparent else {}
                self.session.post(self.url, content=record.raw_payload, headers=headers)
    """
    delivering = _DELIVERING.get()
    return None if delivering is None else delivering.get(id(record))


@contextmanager
def delivering(records: Sequence[Message[Any, Any]], traceparents: Sequence[str]) -> Iterator[None]:
    """While it is entered, :func:`delivery_traceparent` gives each of ``records`` its
    ``traceparents`` entry (the sink route's consumer enters it around ``deliver``)."""
    token = _DELIVERING.set(
        {id(record): traceparent for record, traceparent in zip(records, traceparents, strict=True)}
    )
    try:
        yield
    finally:
        _DELIVERING.reset(token)
