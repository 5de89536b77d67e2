"""A consumer under test: built from its route, fed messages, run, and watched.

:class:`TestPartition` stands where the engine's partition executor stands for a consumer.
It records what the consumer asks of its partition (marks, pauses, resumes, seeks, dead
letters) instead of doing it, and hands out the app's producers, which
:func:`~conveyor.testing.capture` made capture what they are given.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.consumer import Consumer, attach_partition_handle
from conveyor.errors import ConfigurationError, DeserializationError
from conveyor.messages import Message, Messages
from conveyor.processing.model_check import Checked, check_models
from conveyor.processing.strategies import DISPATCH, RETRY, Backoff, FailurePolicy
from conveyor.producer.messages import (
    encode_headers,
    encode_key,
    encode_payload,
    encode_timestamp,
)
from conveyor.records import Record, as_bytes, raw_headers
from conveyor.state.backends import MemoryBackend
from conveyor.state.clock import wall_clock
from conveyor.state.partition_stores import view_class
from conveyor.state.view import State, TableView
from conveyor.testing.capture import capture
from conveyor.tracing.latency import PollTimes

if TYPE_CHECKING:
    from conveyor.producer import Producer
    from conveyor.routing.topic import Topic
    from conveyor.testing.host import AppUnderTest
    from conveyor.tracing.tracer import Tracing

__all__ = [
    "DeadLetter",
    "Mark",
    "Pause",
    "Recorded",
    "TestPartition",
    "consume",
    "consumer_for",
    "produce",
    "recorded",
    "revoke",
]

_NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class Mark:
    """``mark_as_consumed`` (``sync=False``) or ``mark_as_consumed_sync``: ``offset`` is the
    one Kafka would hold next, one past the marked message; ``metadata`` as it was given."""

    offset: int
    sync: bool
    metadata: str | None = None


@dataclass(frozen=True)
class Pause:
    """``pause(offset, timeout)`` as the consumer called it."""

    offset: int | None
    timeout: float | None


@dataclass(frozen=True)
class DeadLetter:
    """A message the consumer moved to a dead letter queue (the copy is in ``produced``)."""

    message: Message
    topic: str
    error: BaseException | None


@dataclass
class Recorded:
    """What a consumer under test asked of its partition, in order."""

    marks: list[Mark] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    resumes: int = 0
    seeks: list[int] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    transactional: bool = False
    """Whether a transaction committed an offset of the partition (then offsets are only
    committed with transactions)."""

    @property
    def committed(self) -> int | None:
        """The offset Kafka would hold for the group: the highest marked (``None``: none)."""
        return max((mark.offset for mark in self.marks), default=None)


class TestPartition:
    """The partition a consumer under test serves (see the module's text)."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, app: AppUnderTest, route: Topic, topic: str, partition: int) -> None:
        self.app = app
        self.route = route
        self.topic = topic
        self.partition = partition
        self.polls = PollTimes()
        """When each fetch came: none here (a test's messages are given, not fetched)."""
        self._views: dict[str, State] | None = None  # the route's stores, made on first use
        self.recorded = Recorded()
        self.attempt = 0
        self.revoked = False
        self.batch: list[Record] = []
        self.next_offset = 0
        self.consumer: Consumer | None = None
        self.committed_metadata: str | None = None
        """What the group had committed as the partition's metadata."""
        self.policy = FailurePolicy(
            topic,
            route.dead_letter_queue,
            Backoff.for_route(route, app.settings),
            app.monitor,
            self.producer,
            self.transactional_producer,
        )
        """The route's failure policy, as the app's partitions have it (dead letters)."""
        self._marked_at_failure = -1

    @property
    def group_id(self) -> str:
        return self.route.consumer_group

    @property
    def collapsed(self) -> bool:
        return False

    @property
    def joint_seat(self) -> None:
        return None  # transactions are not run here

    @property
    def in_lane(self) -> bool:
        return False

    @property
    def high_watermark(self) -> int | None:
        return self.next_offset

    @property
    def kafka(self) -> Mapping[str, Any]:
        return self.app.settings.kafka

    @property
    def tracing(self) -> Tracing | None:
        return self.app.tracing

    def producer(self) -> Producer:
        return self.app.producer

    def transactional_producer(self) -> Producer:
        return self.app.transactional_producer

    @property
    def offset_metadata(self) -> str | None:
        """The metadata of the highest mark that gave one, else :attr:`committed_metadata`."""
        given = [mark for mark in reversed(self.recorded.marks) if mark.metadata is not None]
        if not given:
            return self.committed_metadata
        return max(given, key=lambda mark: mark.offset).metadata  # the latest of the highest

    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        if self.revoked:
            return False
        self.recorded.marks.append(Mark(next_offset, sync, metadata))
        return True

    def offset_at(self, when: float) -> int:
        """The first message of the batch at or after ``when``, else the offset after it."""
        milliseconds = when * 1000
        for record in self.batch:
            if record.timestamp()[1] >= milliseconds:
                return record.offset()
        return self.next_offset

    def send_held(self, offset: int, message: dict[str, Any], producer: Producer) -> Any:
        """A copy sent at least once (``pipe_async(at_least_once=True)``, an RPC reply): the
        captured producer acknowledges it as it is given, so nothing is held."""
        return producer.produce_async(**message)

    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        self.recorded.pauses.append(Pause(offset, timeout))

    def request_resume(self) -> None:
        self.recorded.resumes += 1

    def request_seek(self, offset: int) -> None:
        self.recorded.seeks.append(offset)

    def enhance_dlq_message(self, dlq_message: dict[str, Any], message: Message) -> dict[str, Any]:
        enhanced = None
        if self.consumer is not None:
            enhanced = self.consumer.enhance_dlq_message(dlq_message, message)
        return dlq_message if enhanced is None else enhanced

    def dispatch_to_dlq(
        self, message: Message, dlq_topic: str, error: BaseException | None = None
    ) -> None:
        """The consumer moves ``message`` to the dead letter queue itself, as the route's
        policy sends it (sync or async, in a transaction or not), then marks it."""
        self.policy.dispatch(message, error, self.attempt, dlq_topic, self)
        self.recorded.dead_letters.append(DeadLetter(message, dlq_topic, error))

    def checked(self) -> Checked:
        """The batch against the route's models, as the engine checks it before
        ``consume()``: how many at its front fit (all, for an untyped route)."""
        if not self.route.deserializers.validates:
            return Checked(len(self.batch), None)
        return check_models(self.batch, self.route.deserializers)

    def invalid_head(self, error: DeserializationError) -> None:
        """The batch's first message does not fit its model: the route's failure policy
        decides, as in the app (a dead letter queue gets it at once, a strategy says).

        Raises:
            DeserializationError: ``error``, when the policy retries (the batch stays).
        """
        marked = self.recorded.committed
        verdict = self.policy.failed(
            error, self.attempt, progressed=marked is not None and marked > self._marked_at_failure
        )
        self._marked_at_failure = marked if marked is not None else -1
        self.attempt = verdict.attempt
        if verdict.action == RETRY:
            raise error
        message = Message(self.batch[0], self.route.deserializers)
        self.policy.give_up(message, error, verdict.attempt, verdict.action, self)
        dlq = self.route.dead_letter_queue
        if verdict.action == DISPATCH and dlq is not None and dlq.topic is not None:
            self.recorded.dead_letters.append(DeadLetter(message, dlq.topic, error))
        del self.batch[0]
        self.attempt = 0

    def offsets_in_transactions(self) -> None:
        self.recorded.transactional = True

    def group_metadata(self) -> None:
        return None

    def forget_group_metadata(self) -> None:
        return None

    def state_views(self) -> Mapping[str, State]:
        """The route's stores, each in memory (no changelog): a batch's writes are kept when
        ``consume()`` returns and dropped when it raises, as the engine does."""
        views = self._views
        if views is None:
            views = self._views = {
                name: view_class(store)(name, store, MemoryBackend())
                for name, store in self.route.state.items()
            }
        return views

    def stage_state(self, producer: Producer) -> Callable[[], None] | None:
        return None  # the stores here are written when consume() returns

    def end_state_batch(self, kept: bool) -> None:
        """``consume()`` returned (``kept``) or raised: write or drop its stores' batch."""
        for view in (self._views or {}).values():
            if kept:
                view.commit_to_backend()
            else:
                view.discard()

    def messages(self) -> Messages:
        return Messages(list(self.batch), self.route.deserializers, self.topic, self.partition, 0)


def consumer_for(
    app: AppUnderTest,
    topic: str,
    partition: int = 0,
    *,
    consumer_group: str | None = None,
    offset_metadata: str | None = None,
) -> Consumer:
    """A new instance of the consumer ``app`` routes ``topic`` to, serving ``partition``,
    without a broker. Feed it with :func:`produce`, run it with :func:`consume` (or call its
    ``consume()``), and read :func:`recorded` and :func:`~conveyor.testing.produced`.
    ``offset_metadata`` is what the group had committed as the partition's metadata (what
    :attr:`~conveyor.Consumer.offset_metadata` reads until a mark gives its own).

    The app's producers capture instead of sending from now on (:func:`capture`).

    Raises:
        ConfigurationError: the app does not consume ``topic`` (the message lists what it
            consumes), or more than one consumer group does and ``consumer_group`` is missing.
    """
    routes = [
        route
        for route in app.routes
        if route.consumer_class is not None
        and (route.name == topic or (route.pattern is not None and route.matches(topic)))
        and (consumer_group is None or route.consumer_group == consumer_group)
    ]
    if not routes:
        known = ", ".join(sorted({route.name for route in app.routes})) or "nothing"
        raise ConfigurationError(
            f"the app does not consume {topic!r}"
            + (f" in consumer group {consumer_group!r}" if consumer_group else "")
            + f" (its routes: {known})",
            "topic",
        )
    if len(routes) > 1:
        groups = ", ".join(route.consumer_group for route in routes)
        raise ConfigurationError(
            f"{topic!r} is consumed by more than one consumer group ({groups}): "
            "say which with consumer_group=...",
            "consumer_group",
        )
    route = routes[0]
    if not isinstance(partition, int) or partition < 0:
        raise ConfigurationError(f"partition must be 0 or more, not {partition!r}", "partition")
    capture(app)
    assert route.consumer_class is not None
    instance = route.consumer_class()
    executor = TestPartition(app, route, topic, partition)
    executor.committed_metadata = offset_metadata
    executor.consumer = instance
    instance.topic = topic
    instance.partition = partition
    instance.route = route
    instance.app = app
    attach_partition_handle(instance, executor)
    instance.messages = executor.messages()
    return instance


def _partition_of(consumer: Consumer) -> TestPartition:
    executor = getattr(consumer, "_executor", None)
    if not isinstance(executor, TestPartition):
        raise ConfigurationError(
            f"{consumer!r} was not made by testing.consumer_for(app, topic)", "consumer"
        )
    return executor


def produce(
    consumer: Consumer,
    payload: Any = None,
    *,
    key: Any = None,
    headers: Any = None,
    partition: int | None = None,
    timestamp: datetime | int | None = None,
    offset: int | None = None,
) -> Message:
    """Add a message to the batch ``consumer`` sees next, as Kafka would hand it over: the
    payload serialized as the app's producer would (JSON for what is not bytes or text) and
    decoded by the route's deserializers when the consumer reads it, so a deserializer is
    tested too. ``payload`` may also be a :class:`~conveyor.Message` (one from
    :func:`~conveyor.testing.produced`, say): its raw payload, key and headers are used.

    Offsets follow on from the last one (``offset`` sets one, past the last); ``partition``
    moves a consumer whose batch is empty to that partition; ``timestamp`` is an aware
    datetime or milliseconds since the epoch (default: now). Returns the message.

    Raises:
        InvalidMessageError: the payload, key, headers or timestamp could not be produced.
        ConfigurationError: a partition other than the batch's, or an offset not past the last.
    """
    executor = _partition_of(consumer)
    if isinstance(payload, Message):
        payload, key, headers = payload.raw_payload, payload.raw_key, payload.raw_headers
    if partition is not None and partition != executor.partition:
        if executor.batch:
            raise ConfigurationError(
                f"the batch holds messages of partition {executor.partition}: a batch is one "
                "partition's (run it first, or make another consumer_for that partition)",
                "partition",
            )
        executor.partition = consumer.partition = partition
    if offset is not None and offset < executor.next_offset:
        raise ConfigurationError(
            f"offset {offset} is not past the last one ({executor.next_offset - 1})", "offset"
        )
    serializer = executor.app.producer.settings.serializer
    value = encode_payload(payload, serializer, _NO_LIMIT)
    raw_key = None if key is None else encode_key(key)
    record = _record(executor, value, raw_key, headers, timestamp, offset)
    executor.batch.append(record)
    executor.next_offset = record.offset() + 1
    consumer.messages = executor.messages()
    return Message(record, executor.route.deserializers)


def _record(
    executor: TestPartition,
    value: bytes | str | None,
    key: bytes | str | None,
    headers: Any,
    timestamp: datetime | int | None,
    offset: int | None,
) -> Record:
    checked = encode_headers(headers) if headers is not None else None
    milliseconds = encode_timestamp(timestamp) or round(wall_clock() * 1000)
    return Record(
        executor.topic,
        executor.partition,
        executor.next_offset if offset is None else offset,
        as_bytes(value),
        as_bytes(key),
        raw_headers(checked),
        milliseconds,
    )


def consume(consumer: Consumer) -> None:
    """Run ``consumer.consume()`` on the batch fed so far, as the engine does: an ``async def``
    one on an event loop; when it returns, the batch's last offset is marked (unless the route
    has ``manual_offset_management``) and the next :func:`produce` starts a new batch. When it
    raises, the exception reaches the test and the batch stays, so running it again is the
    retry (``consumer.attempt`` counts up, ``consumer.retrying`` is true).

    A typed route's batch is checked against its models first, as the engine does: the
    messages before one that does not fit are consumed (and marked), then that one takes the
    route's failure policy: with a dead letter queue it is dispatched at once (see
    :func:`recorded` and :func:`~conveyor.testing.produced`) or skipped, and the rest of the
    batch is consumed; without one its ``MessageValidationError`` reaches the test as a
    failure of ``consume()`` would.

    Raises:
        ConfigurationError: nothing was fed, or called inside a running event loop (there,
            ``await consumer.consume()``).
    """
    executor = _partition_of(consumer)
    if not executor.batch:
        raise ConfigurationError(
            "nothing to consume: feed the consumer with testing.produce(consumer, ...)", "messages"
        )
    for _ in range(len(executor.batch)):  # each round consumes or gives up one message or more
        checked = executor.checked()
        if checked.error is not None and checked.valid == 0:
            consumer.messages = executor.messages()
            executor.invalid_head(checked.error)  # raises when the policy retries it
        else:
            _consume_front(consumer, executor, checked)
        if not executor.batch:
            return


def _consume_front(consumer: Consumer, executor: TestPartition, checked: Checked) -> None:
    """``consume()`` on the batch's ``checked.valid`` first messages, then their mark."""
    front = executor.batch[: checked.valid]
    consumer.messages = Messages(
        front,
        executor.route.deserializers,
        executor.topic,
        executor.partition,
        0,
        checked.payloads,
    )
    try:
        result = consumer.consume()
        if inspect.isawaitable(result):
            _run(result)
    except BaseException:
        executor.attempt += 1
        executor.end_state_batch(kept=False)
        raise
    executor.end_state_batch(kept=True)
    if not executor.route.manual_offset_management:
        executor.mark(front[-1].offset() + 1, sync=False)
    del executor.batch[: len(front)]
    executor.attempt = 0


def _run(awaitable: Any) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wrapped() -> None:
            await awaitable

        asyncio.run(wrapped())
        return
    if inspect.iscoroutine(awaitable):
        awaitable.close()  # never awaited: no warning about it
    raise ConfigurationError(
        "testing.consume() runs its own event loop: in an async test, await consumer.consume()",
        "consume",
    )


def put_table(consumer: Consumer, table: str, rows: Mapping[Any, Any]) -> None:
    """Give ``consumer``'s partition of ``table`` (a table its route looks up) these rows, as
    its topic would (a ``None`` value deletes the key)."""
    executor = _partition_of(consumer)
    view = executor.state_views().get(table)
    if not isinstance(view, TableView) or view.kind != "table":
        raise ConfigurationError(
            f"{consumer.topic}: its route looks up no table {table!r} (tables=[...])", "table"
        )
    view.put_from_topic(rows)


def revoke(consumer: Consumer) -> None:
    """Take the partition from ``consumer`` as a rebalance would: ``is_revoked()`` turns true,
    marks are refused (they return False), and its ``revoked()`` hook runs."""
    executor = _partition_of(consumer)
    executor.revoked = True
    result = consumer.revoked()
    if inspect.isawaitable(result):
        _run(result)


def recorded(consumer: Consumer) -> Recorded:
    """What ``consumer`` asked of its partition so far: marks, pauses, resumes, seeks and dead
    letters (see :class:`Recorded`)."""
    return _partition_of(consumer).recorded
