"""``app.routes``: topics, consumer classes, consumer groups and subscription groups, declared once."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from conveyor.consumer import Consumer
from conveyor.driver.clients import check_settings
from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers
from conveyor.routing.dead_letter_queue import parse_dead_letter_queue
from conveyor.routing.topic import INITIAL_OFFSETS, Topic
from conveyor.routing.virtual_partitions import parse_virtual_partitions

if TYPE_CHECKING:
    from conveyor.connect import SinkBinding
    from conveyor.routing.options import PatternOptions, SinkOptions, TopicOptions

__all__ = ["Routes"]

_OPTIONS = frozenset(
    {
        "active",
        "partitions",
        "replication_factor",
        "config",
        "deserializers",
        "max_messages",
        "max_wait_time",
        "initial_offset",
        "assign",
        "manual_offset_management",
        "dead_letter_queue",
        "long_running_job",
        "pause_timeout",
        "pause_max_timeout",
        "pause_with_exponential_backoff",
        "virtual_partitions",
        "kafka",
        "filters",
        "state",
        "window",
        "tables",
    }
)
_NOT_PER_ROUTE = {
    "group.id": "name the group with consumer_group (app.routes.consumer_group(...))",
    "enable.auto.commit": "Conveyor's listener commits what the consumers mark",
    "enable.auto.offset.store": "Conveyor's listener commits what the consumers mark",
    "auto.offset.reset": "use the route's initial_offset",
    "partition.assignment.strategy": "one consumer group has one strategy: set it on the app",
    "group.protocol": "one consumer group has one protocol: set it on the app",
}


class Routes:
    """The route table of an app.

    Example::

        app.routes.topic("orders", OrdersConsumer, partitions=6)
        with app.routes.consumer_group("billing"):
            app.routes.topic("payments", PaymentsConsumer)
            with app.routes.subscription_group("slow"):
                app.routes.topic("reports", ReportsConsumer, max_messages=10)
    """

    def __init__(self, default_group: str) -> None:
        self.default_group = default_group
        self._topics: list[Topic] = []
        self.sinks: list[SinkBinding] = []
        """The sinks of ``sink`` routes (the app opens them at start, closes them at stop)."""
        self._group: str | None = None
        self._subscription: str | None = None
        self._tables: dict[str, Any] = {}  # name: its Store (conveyor.state's: loaded by table())

    def topic(
        self,
        name: str,
        consumer_class: type[Consumer] | None = None,
        **options: Unpack[TopicOptions],
    ) -> Topic:
        """Route ``name`` to ``consumer_class``; ``options`` are those of
        :class:`~conveyor.routing.options.TopicOptions`.

        Raises:
            ConfigurationError: an unknown option, a bad value, a class that is not a
                ``Consumer``, or a topic routed twice in one consumer group.
        """
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ConfigurationError(
                f"routes.topic({name!r}): unknown option {unknown[0]!r}; known: {', '.join(sorted(_OPTIONS))}",
                unknown[0],
            )
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"a route needs a topic name, got {name!r}", "topic")
        if options.get("window") is not None:  # a window with no consumer code: its own consumer
            consumer_class = _window_consumer(name, consumer_class, options.get("window"))
        active = options.get("active", True)
        if not isinstance(active, bool):
            raise ConfigurationError(
                f"routes.topic({name!r}): active must be True or False", "active"
            )
        if active and not (
            inspect.isclass(consumer_class) and issubclass(consumer_class, Consumer)
        ):
            raise ConfigurationError(
                f"routes.topic({name!r}): {consumer_class!r} is not a subclass of conveyor.Consumer",
                "consumer_class",
            )
        group = self._group or self.default_group
        subscription = self._subscription or group
        if any(t.name == name and t.consumer_group == group for t in self._topics):
            raise ConfigurationError(
                f"topic {name!r} is routed twice in consumer group {group!r}", "topic"
            )
        topic = Topic(
            name=name,
            consumer_class=consumer_class,
            consumer_group=group,
            subscription_group=subscription,
            active=active,
            partitions=_positive_int(
                name, "partitions", options.get("partitions"), allow_none=True
            ),
            replication_factor=_positive_int(
                name, "replication_factor", options.get("replication_factor"), allow_none=True
            ),
            config=_config(name, options.get("config")),
            deserializers=_with_models(
                name, _deserializers(name, options.get("deserializers")), consumer_class
            ),
            max_messages=_positive_int(
                name, "max_messages", options.get("max_messages"), allow_none=True
            ),
            max_wait_time=_positive_float(name, "max_wait_time", options.get("max_wait_time")),
            initial_offset=_initial_offset(name, options.get("initial_offset")),
            assign=_assign(name, options.get("assign")),
            manual_offset_management=bool(options.get("manual_offset_management", False)),
            long_running_job=bool(options.get("long_running_job", False)),
            pause_timeout=_positive_float(name, "pause_timeout", options.get("pause_timeout")),
            pause_max_timeout=_positive_float(
                name, "pause_max_timeout", options.get("pause_max_timeout")
            ),
            pause_with_exponential_backoff=_optional_flag(
                name,
                "pause_with_exponential_backoff",
                options.get("pause_with_exponential_backoff"),
            ),
            dead_letter_queue=parse_dead_letter_queue(name, options.get("dead_letter_queue")),
            virtual_partitions=parse_virtual_partitions(name, options.get("virtual_partitions")),
            kafka=_kafka(name, options.get("kafka"), options.get("dead_letter_queue")),
            filters=_filters(name, options.get("filters"), options.get("virtual_partitions")),
            subscription_group_declared=self._subscription is not None,
            state=self._with_tables(
                name,
                _stores(
                    name, options.get("state"), options.get("virtual_partitions"), consumer_class
                ),
                options.get("tables"),
                options.get("virtual_partitions"),
            ),
            window=options.get("window"),
            tables=tuple(options.get("tables") or ()),
        )
        self._topics.append(topic)
        return topic

    def table(
        self,
        topic: str,
        *,
        name: str | None = None,
        keys: str = "str",
        values: Any = "json",
        backend: str | None = None,
        global_table: bool = False,
    ) -> Any:
        """Declare ``topic`` (compacted, keyed) as a table that routes look up
        (``app.routes.topic("orders", Enrich, tables=["customers"])``, then
        ``self.tables["customers"]`` in ``Enrich``). The topic is the table's changelog: each
        partition that looks it up reads its table partition into a local store before its
        first batch and follows the topic after. ``keys``, ``values`` and ``backend`` are a
        :class:`~conveyor.state.Store`'s; ``name`` defaults to the topic's. The topic is
        declared compacted for ``conveyor topics plan`` unless a route names it already.
        ``global_table=True``: every partition of the topic is read into one store per
        process, which every partition looks up whatever its number (small reference data;
        no co-partitioning asked).

        Raises:
            ConfigurationError: a bad name or store option, or a table declared twice.
        """
        from conveyor.state.store import STORE_NAME, Store  # noqa: PLC0415 - tables need it

        if not isinstance(topic, str) or not topic:
            raise ConfigurationError(f"routes.table needs a topic name, got {topic!r}", "topic")
        name = topic if name is None else name
        if not isinstance(name, str) or not STORE_NAME.fullmatch(name):
            raise ConfigurationError(
                f"routes.table({topic!r}): name must be letters, digits, '.', '_' or '-', "
                f"got {name!r}",
                "name",
            )
        if name in self._tables:
            raise ConfigurationError(f"the table {name!r} is declared twice", "name")
        store = Store(
            backend=backend,  # type: ignore[arg-type]
            keys=keys,  # type: ignore[arg-type]
            values=values,
            source=topic,
            global_table=global_table,
        )
        self._tables[name] = store
        if not any(t.name == topic for t in self._topics):
            self.topic(topic, None, active=False, config={"cleanup.policy": "compact"})
        return store

    def _with_tables(
        self, route: str, stores: dict[str, Any], tables: Any, virtual_partitions: Any
    ) -> dict[str, Any]:
        """The route's stores with the tables it looks up (each under its name)."""
        if tables is None:
            return stores
        if isinstance(tables, str) or not all(isinstance(t, str) for t in tables):
            raise ConfigurationError(
                f"routes.topic({route!r}): tables must be a list of table names, got {tables!r}",
                "tables",
            )
        if virtual_partitions:
            raise ConfigurationError(
                f"routes.topic({route!r}): tables and virtual_partitions do not go together yet",
                "tables",
            )
        found = dict(stores)
        for name in tables:
            store = self._tables.get(name)
            if store is None:
                raise ConfigurationError(
                    f"routes.topic({route!r}): no table {name!r}: declare it first with "
                    f"app.routes.table(...) (declared: {', '.join(self._tables) or 'none'})",
                    "tables",
                )
            if name in found:
                raise ConfigurationError(
                    f"routes.topic({route!r}): the table {name!r} and a store have one name",
                    "tables",
                )
            found[name] = store
        return found

    def pattern(
        self,
        regex: str | re.Pattern[str],
        consumer_class: type[Consumer],
        **options: Unpack[PatternOptions],
    ) -> Topic:
        """Route every topic whose name matches ``regex`` to ``consumer_class`` — those that
        exist at start and those created later (librdkafka's regex subscription: a new topic
        is picked up at the next metadata refresh, ``topic.metadata.refresh.interval.ms``,
        which Conveyor sets to 10 s for a listener with a pattern unless the app sets it).
        Takes :meth:`topic`'s options except the declarative ones and ``assign``
        (:class:`~conveyor.routing.options.PatternOptions`). A topic routed by name in the
        same consumer group is read by that route instead.

        Raises:
            ConfigurationError: a malformed expression, or an option a pattern cannot take.
        """
        text = regex.pattern if isinstance(regex, re.Pattern) else regex
        if not isinstance(text, str) or not text.strip("^$"):
            raise ConfigurationError(
                f"routes.pattern needs a regular expression, got {regex!r}", "pattern"
            )
        if not text.startswith("^"):  # librdkafka takes a subscription as a regex by its ^
            text = "^" + text
        try:
            compiled = re.compile(text)
        except re.error as error:
            raise ConfigurationError(
                f"routes.pattern({text!r}) is not a regular expression: {error}", "pattern"
            ) from None
        for option in ("assign", "partitions", "replication_factor", "config"):
            if options.get(option) is not None:
                raise ConfigurationError(
                    f"routes.pattern({text!r}) cannot take {option}: it names no one topic", option
                )
        for option in ("state", "window"):
            if options.get(option) is not None:
                raise ConfigurationError(
                    f"routes.pattern({text!r}) cannot take {option}: a store's changelog is made "
                    "for a topic named ahead; route each topic by name",
                    option,
                )
        dlq = options.get("dead_letter_queue")
        dlq_topic = dlq.get("topic") if isinstance(dlq, Mapping) else None
        if isinstance(dlq_topic, str) and compiled.match(dlq_topic):
            raise ConfigurationError(
                f"routes.pattern({text!r}): its dead letter queue {dlq_topic!r} matches the "
                "pattern (it would read its own dead letters)",
                "dead_letter_queue",
            )
        route = self.topic(text, consumer_class, **options)
        routed = dataclasses.replace(route, pattern=compiled)
        self._topics[self._topics.index(route)] = routed
        return routed

    def rpc(
        self,
        commands_topic: str,
        handlers: Any,
        results_topic: str,
        codec: Any = None,
        authorize: Any = None,
        reply_cache_ttl: float = 600.0,
        **options: Unpack[TopicOptions],
    ) -> Topic:
        """Answer RPC requests on ``commands_topic`` with ``handlers`` (a
        :class:`conveyor.rpc.Handlers`); replies go to ``results_topic`` (declared inactive, so
        that ``conveyor topics migrate`` creates it). ``codec`` encodes requests and replies
        (:data:`conveyor.rpc.JSON` by default); the clients must use the same one.
        ``authorize(request, headers) -> bool`` decides each request before its handler runs;
        a request id answered in the last ``reply_cache_ttl`` seconds gets the same reply
        again (a client's retry runs nothing twice). ``options`` are the commands route's
        (:class:`~conveyor.routing.options.TopicOptions`)."""
        from conveyor.rpc.handlers import JSON, ReplyCache, responder_for  # noqa: PLC0415 - rpc builds on routing

        if authorize is not None and not callable(authorize):
            raise ConfigurationError(
                "authorize must be callable (request, headers) -> bool", "authorize"
            )
        if (
            isinstance(reply_cache_ttl, bool)
            or not isinstance(reply_cache_ttl, int | float)
            or reply_cache_ttl < 0
        ):
            raise ConfigurationError(
                f"reply_cache_ttl must be seconds >= 0, got {reply_cache_ttl!r}", "reply_cache_ttl"
            )
        responder = responder_for(
            handlers, results_topic, codec or JSON, authorize, ReplyCache(float(reply_cache_ttl))
        )
        route = self.topic(commands_topic, responder, **options)
        if not self.find(results_topic):
            self.topic(results_topic, None, active=False, partitions=options.get("partitions"))
        return route

    def sink(self, topic: str, sink: Any, **options: Unpack[SinkOptions]) -> Topic:
        """Push ``topic`` into ``sink`` (a :class:`conveyor.connect.Sink` or ``AsyncSink``).

        ``options`` (:class:`~conveyor.routing.options.SinkOptions`): ``batch_interval``,
        ``max_batch``, ``lanes``, ``ordering``, ``retries``, ``dead_letter_queue`` (a topic)
        and ``max_in_flight`` say how records reach the sink; the options of a route that
        names its topic (``partitions``, ``pause_timeout`` ...) apply as in :meth:`topic`."""
        from conveyor.connect.routing import declare_sink  # noqa: PLC0415 - connect builds on routing

        return declare_sink(self, topic, sink, **options)

    @contextlib.contextmanager
    def consumer_group(self, name: str) -> Iterator[None]:
        """Routes declared inside belong to consumer group ``name`` (its ``group.id``)."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(
                f"a consumer group needs a name, got {name!r}", "consumer_group"
            )
        previous, previous_subscription = self._group, self._subscription
        self._group, self._subscription = name, None
        try:
            yield
        finally:
            self._group, self._subscription = previous, previous_subscription

    @contextlib.contextmanager
    def subscription_group(self, name: str) -> Iterator[None]:
        """Routes declared inside are read by their own listener (their own librdkafka consumer)."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(
                f"a subscription group needs a name, got {name!r}", "subscription_group"
            )
        previous = self._subscription
        self._subscription = name
        try:
            yield
        finally:
            self._subscription = previous

    def remove(self, topic: Topic) -> None:
        """Take ``topic``, a route of this table, out of it again (before the app starts: a
        feature that declared a route by default and is now set up otherwise).

        Raises:
            ValueError: ``topic`` is not a route of this table.
        """
        self._topics.remove(topic)

    def __iter__(self) -> Iterator[Topic]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)

    def active(self) -> list[Topic]:
        """The routes that are consumed."""
        return [topic for topic in self._topics if topic.active]

    def find(self, name: str) -> list[Topic]:
        return [topic for topic in self._topics if topic.name == name]

    def validate(self) -> None:
        """Check the table as a whole (called when the app starts).

        Raises:
            ConfigurationError: nothing to consume, or a consumer group that mixes direct
                assignment (``assign``) with subscribed topics.
        """
        active = self.active()
        if not active:
            raise ConfigurationError(
                "no active routes: declare at least one with app.routes.topic(name, ConsumerClass)",
                "routes",
            )
        _check_assignments_apart(active)


def _check_assignments_apart(routes: list[Topic]) -> None:
    """Directly assigned topics may not share a consumer group with subscribed ones: while the
    group has members, Kafka refuses the offsets a non-member commits (UNKNOWN_MEMBER_ID), so
    the assigned partitions would start again from their old offsets at every restart."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for route in routes:
        assigned, subscribed = groups.setdefault(route.consumer_group, ([], []))
        (assigned if route.direct else subscribed).append(route.name)
    for group, (assigned, subscribed) in groups.items():
        if assigned and subscribed:
            raise ConfigurationError(
                f"consumer group {group!r} mixes direct assignment ({', '.join(assigned)}) with "
                f"subscribed topics ({', '.join(subscribed)}): Kafka refuses the offsets of "
                "partitions assigned outside a group that has members, so they would be read "
                "again at every restart; declare the assigned topics in a consumer group of "
                f"their own (with app.routes.consumer_group({group + '-assigned'!r}): ...)",
                "assign",
            )


def _filters(topic: str, value: Any, virtual_partitions: Any) -> tuple[Any, ...]:
    """A route's filters: objects with ``apply(messages, now) -> Verdict``."""
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ConfigurationError(
            f"routes.topic({topic!r}): filters must be a list of filters", "filters"
        )
    for item in value:
        if not callable(getattr(item, "apply", None)):
            raise ConfigurationError(
                f"routes.topic({topic!r}): {item!r} is not a filter (it needs "
                "apply(messages, now) -> Verdict)",
                "filters",
            )
    if value and virtual_partitions is not None:
        raise ConfigurationError(
            f"routes.topic({topic!r}): filters do not go with virtual_partitions yet", "filters"
        )
    return tuple(value)


def _kafka(topic: str, value: Any, dead_letter_queue: Any = None) -> dict[str, Any]:
    """A route's own librdkafka settings, checked by librdkafka now (with the app's, again,
    when the app starts)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigurationError(
            f"routes.topic({topic!r}): kafka must be a dict of librdkafka settings", "kafka"
        )
    for name, why in _NOT_PER_ROUTE.items():
        if name in value:
            raise ConfigurationError(
                f"routes.topic({topic!r}): {name} cannot be set per route: {why}", name
            )
    for name, setting in value.items():
        if not isinstance(setting, str | int | float | bool):
            raise ConfigurationError(
                f"routes.topic({topic!r}): kafka[{name!r}] must be a string, number or bool "
                f"(callbacks are the app's), got {type(setting).__name__}",
                name,
            )
    check_settings({**value, "enable.auto.commit": False}, "consumer")
    if (
        value.get("bootstrap.servers")
        and isinstance(dead_letter_queue, Mapping)
        and dead_letter_queue.get("transactional")
    ):
        raise ConfigurationError(
            f"routes.topic({topic!r}): a transactional dead letter queue commits the offset "
            "with the app's producer, on the app's cluster: not for a route on another one",
            "transactional",
        )
    return dict(value)


def _positive_int(topic: str, option: str, value: Any, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"routes.topic({topic!r}): {option} must be an integer >= 1, got {value!r}", option
        )
    return value


def _positive_float(topic: str, option: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigurationError(
            f"routes.topic({topic!r}): {option} must be a positive number, got {value!r}", option
        )
    return float(value)


def _optional_flag(topic: str, option: str, value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(
            f"routes.topic({topic!r}): {option} must be True or False, got {value!r}", option
        )
    return value


def _config(topic: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"routes.topic({topic!r}): config must be a dict of topic configs", "config"
        )
    return {str(key): str(item) for key, item in value.items()}


def _deserializers(topic: str, value: Any) -> Deserializers:
    if value is None:
        return Deserializers()
    if isinstance(value, Deserializers):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"payload", "key", "headers"}
        if unknown:
            raise ConfigurationError(
                f"routes.topic({topic!r}): deserializers take payload, key and headers, not {sorted(unknown)[0]!r}",
                "deserializers",
            )
        for name, item in value.items():
            if not callable(item):
                raise ConfigurationError(
                    f"routes.topic({topic!r}): deserializers[{name!r}] must be callable",
                    "deserializers",
                )
        return Deserializers(**value)
    raise ConfigurationError(
        f"routes.topic({topic!r}): deserializers must be a dict or Deserializers", "deserializers"
    )


def _with_models(topic: str, deserializers: Deserializers, consumer_class: Any) -> Deserializers:
    """The route's deserializers with the consumer's models (``Consumer[Payload, Key]``); a
    part decoded both by a model and by a deserializer of the route is refused."""
    payload_model = getattr(consumer_class, "payload_model", None)
    key_model = getattr(consumer_class, "key_model", None)
    if payload_model is None and key_model is None:
        return deserializers
    if payload_model is None and deserializers.payload_model is not None:
        return Deserializers(  # the route's own payload model, the consumer's key model
            deserializers.payload,
            None,
            deserializers.headers,
            payload_model=deserializers.payload_model,
            key_model=key_model,
        )
    plain = Deserializers()
    for part, model in (("payload", payload_model), ("key", key_model)):
        if model is not None and getattr(deserializers, part) is not getattr(plain, part):
            raise ConfigurationError(
                f"routes.topic({topic!r}): {consumer_class.__qualname__} declares a {part} model "
                f"and the route a {part} deserializer; keep one of them",
                "deserializers",
            )
    try:
        return Deserializers(
            None if payload_model is not None else deserializers.payload,
            None if key_model is not None else deserializers.key,
            deserializers.headers,
            payload_model=payload_model,
            key_model=key_model,
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"routes.topic({topic!r}): {exc}", exc.setting) from exc


def _initial_offset(topic: str, value: Any) -> str | None:
    if value is None:
        return None
    if value not in INITIAL_OFFSETS:
        raise ConfigurationError(
            f"routes.topic({topic!r}): initial_offset must be 'earliest' or 'latest', got {value!r}",
            "initial_offset",
        )
    return str(value)


def _assign(topic: str, value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    try:
        partitions = tuple(value)
    except TypeError:
        partitions = ()
    if not partitions or any(
        isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in partitions
    ):
        raise ConfigurationError(
            f"routes.topic({topic!r}): assign must list partition numbers >= 0, got {value!r}",
            "assign",
        )
    return partitions


def _stores(name: str, state: Any, virtual_partitions: Any, consumer_class: Any) -> dict[str, Any]:
    # A consumer class that declares a window imported conveyor.state already: a route of an
    # app that has no state loads nothing of it.
    if state is None and "conveyor.state.windows" not in sys.modules:
        return {}
    from conveyor.state.declaration import route_stores  # noqa: PLC0415 - loaded by its first route

    return route_stores(name, state, virtual_partitions, consumer_class)


def _window_consumer(name: str, consumer_class: Any, window: Any) -> Any:
    if consumer_class is not None:
        raise ConfigurationError(
            f"routes.topic({name!r}): a route with window= runs the window's own consumer: "
            "drop the consumer class, or declare the window on it (see the state guide)",
            "window",
        )
    from conveyor.state.declaration import window_consumer  # noqa: PLC0415 - its first route

    return window_consumer(name, window)
