"""The options of ``app.routes.topic``, ``pattern``, ``rpc`` and ``sink``, as typed dicts.

Each method takes its options as ``**options: Unpack[...]`` of one of these, so that an
editor completes them and mypy checks them in your code (a misspelt option, a value of the
wrong type)::

    app.routes.topic("orders", OrdersConsumer, max_messages=50, initial_offset="latest")

They describe what each kind of route accepts; the route still checks every option when it
is declared (an unknown one raises ``ConfigurationError`` naming it, code without type
checking included). Every option may be left out: each says what leaving it out (or
``None``) means, in brackets. A dict built ahead of the call can be annotated with
its type, e.g. ``dlq: DeadLetterQueueOptions = {"topic": "orders-dlq"}`` (``from
conveyor.routing import DeadLetterQueueOptions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict

if TYPE_CHECKING:
    from conveyor.messages import Deserializers
    from conveyor.processing.filters import Filter
    from conveyor.routing.dead_letter_queue import Strategy
    from conveyor.routing.virtual_partitions import Partitioner, Reducer
    from conveyor.state.store import Store
    from conveyor.state.windows import Windowed

__all__ = [
    "DeadLetterQueueOptions",
    "DeclaredTopicOptions",
    "PatternOptions",
    "RouteOptions",
    "SinkOptions",
    "TopicOptions",
    "VirtualPartitionsOptions",
]


class DeadLetterQueueOptions(TypedDict, total=False):
    """A route's ``dead_letter_queue={...}``: where messages that keep failing go (validated
    into a ``DeadLetterQueue``). Only ``topic`` is required."""

    topic: Required[str | Literal[False]]
    """The dead letter topic; ``False``: skip a message that keeps failing (nothing is sent)."""
    max_retries: int
    """Retries of a failing batch before its first unmarked message goes to the dead letter
    queue (3)."""
    independent: bool
    """Count the retries of each message apart: a success resets the count (``False``)."""
    dispatch_method: Literal["produce_async", "produce_sync"]
    """``"produce_sync"`` waits for the dead letter's acknowledgement (``"produce_async"``)."""
    marking_method: Literal["mark_as_consumed", "mark_as_consumed_sync"]
    """``"mark_as_consumed_sync"`` commits the skipped offset at once (``"mark_as_consumed"``)."""
    transactional: bool
    """Send the dead letter and mark the message in one transaction, with the app's
    transactional producer (``False``)."""
    strategy: Strategy | None
    """``(error, attempt) -> "retry" | "dispatch" | "skip"``, asked at each failure (see
    ``conveyor.processing.strategies``)."""


class VirtualPartitionsOptions(TypedDict, total=False):
    """A route's ``virtual_partitions={...}`` (or ``True`` for every default): each
    partition's messages run in parallel lanes by key, order kept per key (validated into a
    ``VirtualPartitions``)."""

    max_partitions: int | None
    """Lanes per partition (``None``: the app's ``concurrency``)."""
    partitioner: Partitioner | None
    """``message -> key``: messages with equal keys share a lane, in offset order (``None``:
    the message's raw key; keyless messages share one lane)."""
    reducer: Reducer | None
    """``key -> lane`` (an int, taken modulo ``max_partitions``; ``None``: CRC-32 of the key)."""
    retry_finished_lanes: bool
    """After a failure, run again the messages other lanes already finished (``False``)."""
    max_in_flight: int | None
    """Messages handed to lanes and not yet committable, at most; past it, fetching the
    partition pauses (``None``: ten batches' worth, at least 2,000)."""
    linger: float
    """Seconds a lane waits for a full batch (``max_messages``) before it runs what it has
    (0: each message runs the moment it arrives)."""


class RouteOptions(TypedDict, total=False):
    """How a route is read: the options every kind of route takes (``topic``, ``pattern``,
    ``rpc``, ``sink``)."""

    active: bool
    """``False``: declared (for ``conveyor topics migrate``, the web UI) but not consumed
    (``True``)."""
    deserializers: Deserializers | Mapping[str, Callable[..., Any]] | None
    """How ``message.payload``, ``.key`` and ``.headers`` are decoded: a ``Deserializers``
    or a dict of ``payload``, ``key``, ``headers`` callables (``None``: JSON payloads, text
    keys)."""
    max_wait_time: float | None
    """Seconds to wait for the first message of a batch (``None``: the app's)."""
    initial_offset: Literal["earliest", "latest"] | None
    """Where a group without a committed offset starts (``None``: the app's
    ``kafka["auto.offset.reset"]``, else ``"earliest"``)."""
    manual_offset_management: bool
    """Conveyor marks nothing itself; ``consume()`` marks with ``mark_as_consumed``
    (``False``)."""
    long_running_job: bool
    """Pause fetching the partition while a batch runs: nothing buffers behind a long job
    (``False``)."""
    pause_timeout: float | None
    """Seconds before the first retry of a failed batch (``None``: the app's)."""
    pause_max_timeout: float | None
    """The longest wait between retries (``None``: the app's)."""
    pause_with_exponential_backoff: bool | None
    """Double the wait at each retry, up to ``pause_max_timeout`` (``None``: the app's)."""
    kafka: Mapping[str, str | int | float | bool] | None
    """The route's own librdkafka consumer settings, over the app's (another
    ``bootstrap.servers``: another cluster); such routes get listeners of their own."""


class DeclaredTopicOptions(RouteOptions, total=False):
    """The options of a route that names its topic (``topic``, ``rpc``, ``sink``; not
    ``pattern``): the topic's declaration, which ``conveyor topics migrate`` applies, and
    direct assignment."""

    partitions: int | None
    """Partitions ``conveyor topics migrate`` creates the topic with (and grows it to)."""
    replication_factor: int | None
    """Replicas ``conveyor topics migrate`` creates the topic with (``None``: the cluster's
    ``default.replication.factor``)."""
    config: Mapping[str, str | int | float | bool] | None
    """Topic configs ``conveyor topics migrate`` applies (``{"retention.ms": "86400000"}``)."""
    assign: int | Iterable[int] | None
    """Partitions to read by direct assignment (a number or a list), with no group
    membership and no rebalance; the route needs a consumer group of its own."""


class PatternOptions(RouteOptions, total=False):
    """The options of ``app.routes.pattern(regex, Consumer, ...)``: how ``consume()`` gets
    its batches and what happens when it fails."""

    max_messages: int | None
    """The most messages one ``consume()`` of this route gets (``None``: the app's)."""
    dead_letter_queue: DeadLetterQueueOptions | None
    """Where messages go that keep failing (``None``: retried until they succeed)."""
    virtual_partitions: VirtualPartitionsOptions | bool | None
    """Run each partition's messages in parallel lanes by key (``True``: the defaults)."""
    filters: Sequence[Filter] | None
    """Objects that see each batch before ``consume()``: ``Throttle``, ``Delay``, ``Expire``
    or your own (not with ``virtual_partitions`` yet)."""


class TopicOptions(DeclaredTopicOptions, PatternOptions, total=False):
    """The options of ``app.routes.topic(name, Consumer, ...)`` and
    ``app.routes.rpc(commands, handlers, results, ...)``: every route option."""

    state: Store | Mapping[str, Store] | None
    """Key-value stores bound to each partition: ``self.state`` in the consumer (one
    ``Store()``), or ``self.stores[name]`` (a dict of them); see :mod:`conveyor.state`."""
    window: Windowed | None
    """A window with its output (``Tumbling(60).count().to("counts")``), run with no consumer
    class: its results go to its topic, its late messages to ``late_to``."""
    tables: Sequence[str] | None
    """Tables (``app.routes.table``) the consumer looks up as ``self.tables[name]``: the
    table partition of each message's partition number (co-partitioned)."""


class SinkOptions(DeclaredTopicOptions, total=False):
    """The options of ``app.routes.sink(topic, sink, ...)``: how records reach the sink,
    besides the options of a route that names its topic. A sink route sets ``max_messages``,
    ``virtual_partitions`` and ``dead_letter_queue`` itself, from these."""

    batch_interval: float
    """0: each record goes to the sink the moment it is polled; else seconds a lane waits
    for ``max_batch`` records (0)."""
    max_batch: int
    """The most records one ``deliver()`` gets (500)."""
    lanes: int
    """Lanes (virtual partitions) per partition: batches delivered side by side (8)."""
    ordering: Literal["key", "partition", "none"]
    """``"key"``: per-key order over the lanes; ``"partition"``: one lane per partition;
    ``"none"``: records spread over the lanes by offset, in any order (``"key"``)."""
    retries: int | None
    """With ``dead_letter_queue``: attempts before the first undelivered record goes there
    (``None``: 3). Without one, a record is retried until it is delivered."""
    dead_letter_queue: str | None
    """A topic for the records that cannot be delivered, and for those the sink rejects
    (``None``: nothing is dropped)."""
    max_in_flight: int | None
    """Records handed to lanes and not yet committable, at most; past it, fetching pauses
    (``None``: the virtual partitions' default)."""
