"""A route: one topic, the consumer class that handles it, and how."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conveyor.messages import Deserializers
from conveyor.routing.dead_letter_queue import DeadLetterQueue
from conveyor.routing.virtual_partitions import VirtualPartitions

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.state.store import Store
    from conveyor.state.windows import Windowed

__all__ = ["INITIAL_OFFSETS", "Topic"]

INITIAL_OFFSETS = ("earliest", "latest")


@dataclass(frozen=True)
class Topic:
    """One routed topic, as declared with ``app.routes.topic(...)`` (frozen once declared).

    ``consumer_group`` / ``subscription_group`` say which group and which listener (one
    librdkafka consumer) read it; ``assign`` lists partitions for direct assignment (no group
    rebalancing); ``partitions``, ``replication_factor`` and ``config`` are the declarative
    topic settings that ``conveyor topics migrate`` applies; ``dead_letter_queue`` says where
    messages go that keep failing.
    """

    name: str
    consumer_class: type[Consumer] | None
    consumer_group: str
    subscription_group: str
    active: bool = True
    """``False``: declared (for ``conveyor topics migrate``, the web UI) but not consumed."""
    partitions: int | None = None
    """Partitions ``conveyor topics migrate`` creates the topic with (and grows it to)."""
    replication_factor: int | None = None
    """Replicas ``conveyor topics migrate`` creates the topic with (``None``: the cluster's
    ``default.replication.factor``, which ``conveyor topics plan`` shows)."""
    config: Mapping[str, str] = field(default_factory=dict)
    """Topic configs ``conveyor topics migrate`` applies (``{"retention.ms": "86400000"}``)."""
    deserializers: Deserializers = field(default_factory=Deserializers)
    """How ``message.payload``, ``.key`` and ``.headers`` are decoded (JSON payloads, text
    keys by default)."""
    max_messages: int | None = None
    """The most messages one ``consume()`` of this route gets (``None``: the app's)."""
    max_wait_time: float | None = None
    """Seconds to wait for the first message of a batch (``None``: the app's)."""
    initial_offset: str | None = None
    """Where a group without a committed offset starts: ``"earliest"`` or ``"latest"``.
    ``None``: the app's ``kafka["auto.offset.reset"]``, else ``"earliest"``."""
    assign: tuple[int, ...] | None = None
    """Partitions to read by direct assignment (a number or a list), with no group rebalancing."""
    manual_offset_management: bool = False
    """Conveyor marks nothing itself; ``consume()`` marks with ``mark_as_consumed``."""
    pause_timeout: float | None = None
    """Per-topic override of the app's ``pause_timeout`` (first wait before a retry)."""
    pause_max_timeout: float | None = None
    """Per-topic override of the app's ``pause_max_timeout`` (the longest wait)."""
    pause_with_exponential_backoff: bool | None = None
    """Per-topic override of the app's ``pause_with_exponential_backoff``."""
    long_running_job: bool = False
    """Pause fetching the partition while a batch runs (no buffering behind a long job)."""
    dead_letter_queue: DeadLetterQueue | None = None
    """Where messages go that keep failing: a dict (see below), validated at declaration."""
    virtual_partitions: VirtualPartitions | None = None
    """Run each partition's messages in parallel lanes by key (order kept per key)."""
    filters: tuple[Any, ...] = ()
    """Objects that see each batch before ``consume()`` (see :mod:`conveyor.processing.filters`)."""
    kafka: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The route's own librdkafka settings, over the app's (another cluster with its own
    ``bootstrap.servers``, or any consumer setting): such routes get listeners of their own."""
    pattern: re.Pattern[str] | None = None
    """For ``app.routes.pattern(...)``: the regular expression (``name`` is its text, which
    librdkafka subscribes to); every topic it matches is read with this route."""
    subscription_group_declared: bool = False
    """Whether the route was declared inside ``app.routes.subscription_group(...)``. Routes
    that were not are packed over the app's ``max_listeners`` listeners when it starts (see
    :mod:`conveyor.routing.packing`); a declared subscription group is kept as it is."""
    state: Mapping[str, Store] = field(default_factory=dict)
    """Key-value stores bound to each partition, by name (``self.stores[name]`` in the
    consumer); one ``Store()`` is named ``default`` (``self.state``). See the state guide."""
    window: Windowed | None = None
    """A window run with no consumer class (``Tumbling(60).count().to("counts")``): its
    results go to its topic, its late messages to its ``late_to``."""
    tables: tuple[str, ...] = ()
    """Tables (``app.routes.table``) the consumer looks up as ``self.tables[name]``: the
    table partition of the message's partition (co-partitioned), or a global table whole."""

    def matches(self, topic: str) -> bool:
        """Whether this route reads ``topic`` (its name, or a match of its pattern)."""
        return topic == self.name if self.pattern is None else bool(self.pattern.match(topic))

    @property
    def state_has_tables(self) -> bool:
        """Whether the route looks up tables (stores read from a topic of their own)."""
        return any(store.source is not None for store in self.state.values())

    @property
    def direct(self) -> bool:
        """Whether this topic is read by direct assignment rather than a group subscription."""
        return self.assign is not None
