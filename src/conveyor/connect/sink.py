"""What a sink is: ``open()``, ``deliver(records)``, ``flush()``, ``close()`` (or their
``async def`` variants), and what ``deliver`` may answer per record.

``deliver`` gets a batch of records (:class:`conveyor.Message`: ``topic``, ``partition``,
``offset``, ``key``, ``payload``, ``headers``, ``raw_payload`` ...) of one lane, in offset
order. It returns ``None`` when every record was delivered, or one result per record:

- ``None`` (or :data:`DELIVERED`): delivered;
- :class:`Reject` (``reason``): this record can never be delivered (it cannot be encoded, the
  endpoint refused it with a 4xx): it goes to the route's dead letter queue with the reason;
- :class:`Retry` (``reason``): not now: this record and every one after it in the batch are
  delivered again after the route's back-off (the records before it count as delivered).

A sink may also have ``use_route(topic, ordering, dead_letters)``: the route calls it when it
is declared, with its topic, its ``ordering`` (``"key"``, ``"partition"`` or ``"none"``) and
whether it has a dead letter queue (without one a :class:`Reject` is retried like a
:class:`Retry`: nothing is dropped). Under ``"key"`` a batch's records of different keys carry
no order among themselves, under ``"none"`` no two records do, so such a sink may deliver
them side by side (the Webhook does); it may raise ``ConfigurationError`` to refuse a route.

``deliver`` raising is a :class:`Retry` of the whole batch: the partition pauses for the
route's back-off and tries again (after ``retries`` attempts, with a dead letter queue, the
first record not delivered goes there).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from conveyor.errors import ConveyorError

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["DELIVERED", "AsyncSink", "Reject", "Result", "Retry", "Sink", "SinkRejected"]


@dataclass(frozen=True, slots=True)
class Reject:
    """The record can never be delivered: to the dead letter queue, with ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Retry:
    """Not delivered now: this record and the ones after it are delivered again later."""

    reason: str


DELIVERED = None
"""The result of a delivered record."""

Result = Reject | Retry | None


class SinkRejected(ConveyorError):
    """Why a sink rejected a record.

    Raised when a sink answers :class:`Reject` for a record, though not into your code: the
    route builds one from the ``reason`` and sends the record with it to the route's dead
    letter queue (its ``original_error_class`` and ``original_error_message`` headers).

    What to do: read the dead letter's reason; fix the record (or the sink) and replay it.
    """


@runtime_checkable
class Sink(Protocol):
    """A synchronous sink: its methods run on the worker pool, one batch per lane at a time."""

    def open(self) -> None:
        """Acquire what delivering needs (connections, files); called when the app starts."""

    def deliver(self, records: Sequence[Message]) -> Sequence[Result] | None:
        """Deliver ``records`` (one lane's, in order); see the module for the answer."""

    def flush(self) -> None:
        """Make what was delivered durable; called before the app stops."""

    def close(self) -> None:
        """Release what :meth:`open` acquired; called when the app stops."""


@runtime_checkable
class AsyncSink(Protocol):
    """An asynchronous sink: its methods run on the app's event loop, lanes concurrently."""

    def open(self) -> Awaitable[None]: ...

    def deliver(self, records: Sequence[Message]) -> Awaitable[Sequence[Result] | None]: ...

    def flush(self) -> Awaitable[None]: ...

    def close(self) -> Awaitable[None]: ...
