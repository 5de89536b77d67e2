"""``app.routes.sink(topic, sink, ...)``: a route whose consumer hands records to a sink, on
virtual partitions (lanes) so that order per key and the commit that never passes an
undelivered record come from the consumer engine."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Unpack

from conveyor.connect.consumer import SinkBinding, sink_consumer
from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.routing.options import (
        DeadLetterQueueOptions,
        DeclaredTopicOptions,
        VirtualPartitionsOptions,
    )
    from conveyor.routing.routes import Routes
    from conveyor.routing.topic import Topic

__all__ = ["ORDERINGS", "declare_sink"]

ORDERINGS = ("key", "partition", "none")


def declare_sink(
    routes: Routes,
    topic: str,
    sink: Any,
    *,
    batch_interval: float = 0.0,
    max_batch: int = 500,
    lanes: int = 8,
    ordering: str = "key",
    retries: int | None = None,
    dead_letter_queue: str | None = None,
    max_in_flight: int | None = None,
    **options: Unpack[DeclaredTopicOptions],
) -> Topic:
    """The route of ``app.routes.sink``: its options are
    :class:`~conveyor.routing.options.SinkOptions`."""
    where = f"routes.sink({topic!r})"
    for method in ("open", "deliver", "flush", "close"):
        if not callable(getattr(sink, method, None)):
            raise ConfigurationError(
                f"{where}: {sink!r} is not a sink: it has no {method}() (see conveyor.connect.Sink)",
                "sink",
            )
    asynchronous = inspect.iscoroutinefunction(sink.deliver)
    if ordering not in ORDERINGS:
        raise ConfigurationError(
            f"{where}: ordering must be one of {', '.join(ORDERINGS)}, got {ordering!r}",
            "ordering",
        )
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise ConfigurationError(f"{where}: lanes must be an integer >= 1, got {lanes!r}", "lanes")
    if (
        isinstance(batch_interval, bool)
        or not isinstance(batch_interval, int | float)
        or batch_interval < 0
    ):
        raise ConfigurationError(
            f"{where}: batch_interval must be seconds >= 0, got {batch_interval!r}",
            "batch_interval",
        )
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
    ):
        raise ConfigurationError(
            f"{where}: retries must be an integer >= 0, got {retries!r}", "retries"
        )
    if retries is not None and dead_letter_queue is None:
        raise ConfigurationError(
            f"{where}: retries needs a dead_letter_queue (without one, a record is retried until "
            "it is delivered: nothing is dropped)",
            "retries",
        )
    use_route = getattr(sink, "use_route", None)
    if callable(use_route):  # e.g. a sink that may deliver different keys side by side
        try:
            use_route(topic, ordering, dead_letter_queue is not None)
        except ConfigurationError as refused:
            raise ConfigurationError(f"{where}: {refused}", refused.setting) from None
    virtual: VirtualPartitionsOptions = {
        "max_partitions": 1 if ordering == "partition" else lanes,
        "linger": float(batch_interval),
    }
    if ordering == "none":
        virtual["partitioner"] = lambda message: message.offset
    if max_in_flight is not None:
        virtual["max_in_flight"] = max_in_flight
    dlq: DeadLetterQueueOptions | None = None
    if dead_letter_queue is not None:
        dlq = {"topic": dead_letter_queue, "max_retries": 3 if retries is None else retries}
    binding = SinkBinding(topic, sink, asynchronous)
    route = routes.topic(
        topic,
        sink_consumer(binding, rejectable=dead_letter_queue is not None),
        max_messages=max_batch,
        virtual_partitions=virtual,
        dead_letter_queue=dlq,
        **options,
    )
    routes.sinks.append(binding)
    return route
