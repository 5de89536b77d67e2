"""``Consumer``: the base class of the user's consumers (Karafka's BaseConsumer)."""

from __future__ import annotations

import asyncio
import functools
import logging
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar

from conveyor.errors import ConfigurationError, TransactionError
from conveyor.messages import KeyT, Message, Messages, PayloadT, piped_message
from conveyor.producer import BatchDeliveryHandle, DeliveryHandle, DeliveryReport, Producer
from conveyor.producer.transactions import off_the_loop
from conveyor.validation import check_aware

if TYPE_CHECKING:
    from conveyor.host import Host
    from conveyor.partition import PartitionHandle
    from conveyor.processing.joint_transaction import Seat
    from conveyor.producer.transactions import Transactions
    from conveyor.routing.topic import Topic
    from conveyor.state.view import State

__all__ = ["Consumer", "TransactionBlock", "attach_partition_handle", "partition_handle"]

_log = logging.getLogger("conveyor.transactions")

P = ParamSpec("P")
R = TypeVar("R")


def _same_as(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[[Callable[..., Any]], Callable[Concatenate[Consumer, P], R]]:
    """Give a forwarding method the signature and docstring of the producer method it calls."""

    def forward(function: Callable[..., Any]) -> Callable[Concatenate[Consumer, P], R]:
        functools.update_wrapper(function, method, assigned=("__doc__", "__annotations__"))
        return function

    return forward


class Consumer(Generic[PayloadT, KeyT]):
    """Subclass it and implement ``consume``. One instance serves one topic-partition for
    as long as this process owns it, so it may keep state between batches.

    Typed messages: ``class Orders(Consumer[Order])`` declares the payload model (a pydantic
    model, a msgspec Struct, a dataclass or a TypedDict), ``Consumer[Order, OrderKey]`` the key
    model too (also ``str``, ``int`` or ``UUID``). Payloads are then validated instances of it
    (``self.messages`` is typed so under mypy), and a payload that does not fit goes to the
    route's dead letter queue at once, with what was wrong (see the typed messages guide).

    Hooks: ``consume()`` (sync or ``async def``) gets ``self.messages``, a batch of one
    partition in order; ``revoked()`` runs after the partition was taken away; ``shutdown()``
    when the process stops; ``reached_end()`` when the end of the partition was reached (with
    ``enable.partition.eof``; ``eofed()``, Karafka's name, is kept as an alias: override either).

    After ``consume()`` returns, the batch's last offset is marked as consumed (committed
    asynchronously) unless the route has ``manual_offset_management=True``; if it raises, the
    batch is retried after ``pause_timeout`` (growing up to ``pause_max_timeout``).

    Example::

        class OrdersConsumer(Consumer):
            def consume(self) -> None:
                for message in self.messages:
                    handle(message.payload)
    """

    messages: Messages[PayloadT, KeyT]
    """The current batch (one partition, in offset order)."""
    payload_model: ClassVar[Any] = None
    """The payload model declared with ``Consumer[Model]`` (``None``: JSON, untyped)."""
    key_model: ClassVar[Any] = None
    """The key model declared with ``Consumer[Payload, Key]`` (``None``: UTF-8 text)."""
    produces: ClassVar[Mapping[str, Any]] = {}
    """The topics this consumer produces to, each with its payload model (``None``: JSON of
    any shape): ``produces = {"invoices": Invoice}``. Documentation only: the AsyncAPI
    document shows them as the app's send operations."""
    topic: str
    """The topic this instance serves."""
    partition: int
    """The partition this instance serves."""
    route: Topic
    """The route (options) of the topic."""
    virtual_partition: int | None = None
    """The lane this instance runs (``0 .. max_partitions - 1``) on a route with
    ``virtual_partitions``; ``None`` without them."""
    app: Host
    _executor: PartitionHandle
    _transaction: _TransactionScope | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = [_declared(argument) for argument in _consumer_arguments(cls)]
        own = cls.__dict__  # a model set in the class body wins over the type arguments
        if declared and declared[0] is not None and "payload_model" not in own:
            cls.payload_model = declared[0]
        if len(declared) > 1 and declared[1] is not None and "key_model" not in own:
            cls.key_model = declared[1]

    def consume(self) -> Awaitable[None] | None:
        """Handle ``self.messages``. Override this."""
        raise NotImplementedError(f"{type(self).__name__} must implement consume()")

    def revoked(self) -> Awaitable[None] | None:
        """The partition was assigned to another process; stop work that depends on it."""
        return None

    def shutdown(self) -> Awaitable[None] | None:
        """The process is stopping; release what the instance holds."""
        return None

    def reached_end(self) -> Awaitable[None] | None:
        """The end of the partition was reached (needs ``enable.partition.eof``): every message
        there was is handled. The engine calls this; unless a subclass overrides it, it calls
        :meth:`eofed`, so a consumer written with Karafka's name works too."""
        return self.eofed()

    def eofed(self) -> Awaitable[None] | None:
        """Karafka's name for :meth:`reached_end`, kept as an alias: override either one (the
        engine calls ``reached_end()``, which calls this unless it is overridden itself)."""
        return None

    def tick(self) -> Awaitable[None] | None:
        """Called when no message arrived for this partition for ``max_wait_time``, and again
        every ``max_wait_time`` while none does (override it for periodic work). Each assigned
        partition ticks on its own, including one that had no message in this process yet."""
        return None

    # -- offsets ------------------------------------------------------------------------------

    def mark_as_consumed(self, message: Message, metadata: str | None = None) -> bool:
        """Store ``message``'s offset as processed; it is committed asynchronously (inside
        :meth:`transaction`: with the transaction).

        ``metadata``, a string, is committed with the offset (Kafka keeps one per partition
        and group; brokers take up to ``offset.metadata.max.bytes``, 4096 by default) and
        read back by the partition's next owner as :attr:`offset_metadata`. It sticks: later
        marks without metadata commit it again, so ``""`` clears it. With virtual partitions
        it goes with the first commit that includes the marked message.

        Returns False when this process no longer owns the partition.

        Raises:
            ConfigurationError: ``metadata`` is not a string.
        """
        if metadata is not None and not isinstance(metadata, str):
            raise _not_metadata(metadata)
        scope = self._transaction
        if scope is not None:
            return scope.mark(message.offset + 1, metadata)
        return self._executor.mark(message.offset + 1, False, metadata)

    def mark_as_consumed_sync(self, message: Message, metadata: str | None = None) -> bool:
        """Store and commit ``message``'s offset now, with ``metadata`` as
        :meth:`mark_as_consumed` (inside :meth:`transaction`: with the transaction); False if
        the partition was lost."""
        if metadata is not None and not isinstance(metadata, str):
            raise _not_metadata(metadata)
        scope = self._transaction
        if scope is not None:
            return scope.mark(message.offset + 1, metadata)
        return self._executor.mark(message.offset + 1, True, metadata)

    @property
    def offset_metadata(self) -> str | None:
        """The metadata of this partition's offset in the consumer group (Karafka's
        ``offset_metadata``): what the group had committed when this process was assigned
        the partition, read once then, and from this process's first mark with ``metadata``
        on, the metadata of the highest such mark. ``None``: none was committed."""
        return self._executor.offset_metadata

    def transaction(self) -> TransactionBlock:
        """Consume-transform-produce, exactly once: what the block produces (``produce_*``,
        ``pipe_*`` of this consumer) and the offset it marks (``mark_as_consumed``) are
        committed together in one Kafka transaction of the app's transactional producer, or
        not at all. ``with self.transaction():`` in ``consume()``, ``async with
        self.transaction():`` in ``async def consume()`` (the loop runs the other lanes while
        the transaction waits for the broker).

        An exception in the block aborts the transaction (nothing it produced is visible to
        ``read_committed`` readers, its offset is not committed) and propagates, so the batch
        is retried from the last committed mark as any failure is. A partition revoked while
        the block ran aborts it too (the broker also refuses the offsets of a stale group
        generation). Once a transaction marked an offset of this partition, its offsets are
        committed by transactions only (see the README's "Exactly once"). The block gets the
        transactional producer (``as producer``).

        Raises:
            TransactionError: nested, the partition was revoked, or Kafka refused the
                transaction (it was aborted).
            ConfigurationError: on a route with virtual partitions (not supported), or
                ``with`` in an ``async def consume()`` (use ``async with``).
        """
        return TransactionBlock(self)

    def _open_transaction(self) -> tuple[Producer, _TransactionScope]:
        """The checks before a transaction opens; its producer and the scope that records
        the block's marks."""
        if self._transaction is not None:
            raise TransactionError("transactions do not nest: this consumer is already in one")
        executor = self._executor
        if executor.in_lane:
            raise ConfigurationError(
                "transaction() is not available in virtual partitions' lanes", "virtual_partitions"
            )
        own_cluster = self.route.kafka.get("bootstrap.servers")
        if own_cluster and own_cluster != executor.kafka.get("bootstrap.servers"):
            raise TransactionError(
                f"{self.topic} is read from another cluster ({own_cluster}) than the app's "
                "transactional producer writes to: a transaction cannot commit its offsets"
            )
        return executor.transactional_producer(), _TransactionScope(executor)

    @contextmanager
    def _transaction_in_thread(self) -> Iterator[Producer]:
        producer, scope = self._open_transaction()
        with producer.transaction() as transactions:
            self._transaction = scope
            try:
                yield producer
                # the stores' changelogs join the outputs and the offset; written locally after
                apply_state = self._executor.stage_state(producer)
                self._send_offsets(scope, transactions)
            finally:
                self._transaction = None
        if apply_state is not None:
            apply_state()
        assert scope.next_offset is not None
        # committed: retries start after it
        self._executor.mark(scope.next_offset, False, scope.metadata)

    @asynccontextmanager
    async def _transaction_on_loop(self) -> AsyncIterator[Producer]:
        producer, scope = self._open_transaction()
        async with producer.transaction_async() as transactions:
            self._transaction = scope
            try:
                yield producer
                apply_state = await off_the_loop(self._executor.stage_state, producer)
                # on a thread (the first one commits what was marked before, synchronously);
                # a cancellation waits for it, so that the abort never runs beside it
                await off_the_loop(self._send_offsets, scope, transactions)
            finally:
                self._transaction = None
        if apply_state is not None:
            apply_state()
        assert scope.next_offset is not None
        self._executor.mark(scope.next_offset, False, scope.metadata)

    def _check_marked(self, scope: _TransactionScope) -> int:
        """The block ended without an error: the offset it marked, to commit with it."""
        # The invariant: a transaction commits with its input's offset or not at all;
        # outputs without it would be produced again by whoever reads the partition next.
        if self._executor.revoked or scope.refused:
            raise TransactionError(
                f"{self.topic}/{self.partition} was revoked during the transaction: "
                "aborted, its offset not committed"
            )
        if scope.next_offset is None:
            raise TransactionError(
                f"the transaction on {self.topic}/{self.partition} marked no offset: "
                "call mark_as_consumed inside the block (aborted: its outputs would "
                "commit without their input's offset, and be produced again)"
            )
        return scope.next_offset

    def _batch_span(self) -> tuple[int, int]:
        """The batch's first offset and the one after its last (a joint transaction's)."""
        messages = self.messages
        if not messages:
            raise TransactionError(
                "a transaction that others join (transaction_interval) needs a batch: "
                "open it in consume()"
            )
        return messages.first.offset, messages.last.offset + 1

    @contextmanager
    def _joint_in_thread(self, seat: Seat) -> Iterator[Producer]:
        """The block joins the app's open transaction (``transaction_interval``): see
        :mod:`conveyor.processing.joint_transaction`."""
        producer, scope = self._open_transaction()
        first, through = self._batch_span()
        seat.enter(first)
        transactions = producer.transactions
        joined = transactions.join_shared()
        self._transaction = scope
        try:
            yield producer
            next_offset = self._check_marked(scope)
        except BaseException as exc:
            self._transaction = None
            transactions.leave_shared(joined)
            seat.fail(exc, first, through)
            raise
        self._transaction = None
        transactions.leave_shared(joined)
        if seat.leave(next_offset, scope.metadata):
            seat.close()

    @asynccontextmanager
    async def _joint_on_loop(self, seat: Seat) -> AsyncIterator[Producer]:
        producer, scope = self._open_transaction()
        first, through = self._batch_span()
        try:
            await off_the_loop(seat.enter, first)
        except asyncio.CancelledError:  # it entered all the same (a thread finished it)
            await off_the_loop(seat.fail, asyncio.CancelledError(), first, through)
            raise
        transactions = producer.transactions
        joined = transactions.join_shared()
        self._transaction = scope
        try:
            yield producer
            next_offset = self._check_marked(scope)
        except BaseException as exc:
            self._transaction = None
            transactions.leave_shared(joined)
            await off_the_loop(seat.fail, exc, first, through)
            raise
        self._transaction = None
        transactions.leave_shared(joined)
        if seat.leave(next_offset, scope.metadata):
            await off_the_loop(seat.close)

    def _send_offsets(self, scope: _TransactionScope, transactions: Transactions) -> None:
        """The block ended without an error: send the offset it marked with the transaction
        (blocking: the broker's answer)."""
        executor = self._executor
        next_offset = self._check_marked(scope)
        executor.offsets_in_transactions()
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug(
                "transaction of %s/%s sends offset %d", self.topic, self.partition, next_offset
            )
        metadata = scope.metadata if scope.metadata is not None else executor.offset_metadata
        try:
            transactions.send_offsets(
                [(self.topic, self.partition, next_offset)],
                executor.group_metadata(),
                metadata=None if metadata is None else {(self.topic, self.partition): metadata},
            )
        except TransactionError:
            executor.forget_group_metadata()  # a new generation: ask again
            raise

    @property
    def collapsed(self) -> bool:
        """Whether the partition runs in one lane, in strict order, after a failure (with
        virtual partitions; always False without them)."""
        return self._executor.collapsed

    def is_revoked(self) -> bool:
        """Whether the partition was taken from this process (a long job may stop early)."""
        return self._executor.revoked

    # -- state --------------------------------------------------------------------------------

    @property
    def stores(self) -> Mapping[str, State]:
        """The partition's state stores by name (the route's ``state=``), opened and restored
        before the partition's first batch. What a batch writes is kept with the batch: it
        becomes durable (changelog, then the local store) when the batch ends well, and is
        dropped when it fails."""
        views = self._executor.state_views()
        if not self.route.state_has_tables:
            return views
        return {name: view for name, view in views.items() if view.kind != "table"}

    @property
    def tables(self) -> Mapping[str, State]:
        """The tables the route looks up (``tables=[...]``) by name: this partition's part
        of each, read-only, as full as its topic was when the partition's first batch began
        and following it since (see ``app.routes.table``)."""
        views = self._executor.state_views()
        return {name: view for name, view in views.items() if view.kind == "table"}

    @property
    def state(self) -> State:
        """The partition's store when the route declares one (``state=Store()``).

        Raises:
            ConfigurationError: the route declares no store, or several (use :attr:`stores`).
        """
        stores = self.stores
        if len(stores) == 1:
            return next(iter(stores.values()))
        if not stores:
            raise ConfigurationError(
                f"{self.topic}: the route declares no state store: "
                "app.routes.topic(..., state=Store())",
                "state",
            )
        raise ConfigurationError(
            f"{self.topic}: the route declares {len(stores)} stores "
            f"({', '.join(sorted(stores))}): read one with self.stores[name]",
            "state",
        )

    # -- flow ---------------------------------------------------------------------------------

    def pause(self, offset: int | None = None, timeout: float | None = None) -> None:
        """Stop processing this partition; resume from ``offset`` (default: the message after the
        last one marked) after ``timeout`` seconds, or when :meth:`resume` is called."""
        self._executor.request_pause(offset, timeout)

    def resume(self) -> None:
        """Resume a paused partition."""
        self._executor.request_resume()

    def seek(self, offset: int | datetime) -> int:
        """Continue this partition from ``offset`` (the rest of the current batch is dropped),
        or, given an aware datetime, from the first message at or after that time (the
        partition's end when none is that new: the next message to come). Returns the
        offset.

        Raises:
            ConfigurationError: ``offset`` is neither an int nor a datetime with a time zone.
            KafkaError: the broker did not say which offset that time is.
        """
        if isinstance(offset, datetime):
            offset = self._executor.offset_at(check_aware("offset", offset).timestamp())
        elif isinstance(offset, bool) or not isinstance(offset, int):
            raise ConfigurationError(
                f"seek needs an offset or a datetime with a time zone, not {offset!r}", "offset"
            )
        self._executor.request_seek(offset)
        return offset

    # -- producing ----------------------------------------------------------------------------

    @property
    def producer(self) -> Producer:
        """The app's producer (inside :meth:`transaction`: its transactional producer)."""
        if self._transaction is not None:
            return self._executor.transactional_producer()
        return self._executor.producer()

    @_same_as(Producer.produce_sync)
    def produce_sync(self, **message: Any) -> Any:
        return self.producer.produce_sync(**message)

    @_same_as(Producer.produce_async)
    def produce_async(self, **message: Any) -> Any:
        return self.producer.produce_async(**message)

    @_same_as(Producer.produce_many_sync)
    def produce_many_sync(self, messages: Any, **options: Any) -> Any:
        return self.producer.produce_many_sync(messages, **options)

    @_same_as(Producer.produce_many_async)
    def produce_many_async(self, messages: Any, **options: Any) -> Any:
        return self.producer.produce_many_async(messages, **options)

    # -- errors and dead letter queues --------------------------------------------------------

    @property
    def attempt(self) -> int:
        """1 on a batch's first try, 2 on its first retry, and so on."""
        return self._executor.attempt + 1

    @property
    def retrying(self) -> bool:
        """Whether this batch is being retried after ``consume`` raised."""
        return self._executor.attempt > 0

    def dispatch_to_dlq(self, message: Message, error: BaseException | None = None) -> None:
        """Move ``message`` to the route's dead letter queue now, and mark it as consumed;
        ``error`` (why) goes into its ``original_error_*`` headers.

        Raises:
            ConfigurationError: the route has no dead letter queue topic.
        """
        dlq = self.route.dead_letter_queue
        if dlq is None or dlq.topic is None:
            raise ConfigurationError(
                f"topic {self.topic!r} has no dead letter queue topic: route it with dead_letter_queue={{'topic': ...}}",
                "dead_letter_queue",
            )
        self._executor.dispatch_to_dlq(message, dlq.topic, error)

    def enhance_dlq_message(
        self, dlq_message: dict[str, Any], skippable_message: Message
    ) -> dict[str, Any] | None:
        """Override to change a DLQ message (a produce dict) before it is sent; return it (or
        ``None`` to keep it as changed in place)."""
        return None

    # -- piping -------------------------------------------------------------------------------

    def enhance_pipe_message(
        self, pipe_message: dict[str, Any], message: Message
    ) -> dict[str, Any] | None:
        """Override to change each piped message (a produce dict); return it (or ``None``)."""
        return None

    def _pipe_message(self, topic: str, message: Message) -> dict[str, Any]:
        piped = piped_message(message, topic, self._executor.group_id)
        enhanced = self.enhance_pipe_message(piped, message)
        return piped if enhanced is None else enhanced

    def pipe_async(
        self, *, topic: str, message: Message, at_least_once: bool = False
    ) -> DeliveryHandle:
        """Forward ``message`` (key, payload, headers, plus ``source_*`` headers) to ``topic``.

        With ``at_least_once=True`` the offset of ``message`` is not committed before the
        broker acknowledged the copy (even when the batch is marked as consumed meanwhile),
        and a copy that fails is sent again after the topic's back-off: a crash reads the
        message again instead of losing it."""
        if at_least_once and self._transaction is not None:
            raise TransactionError(
                "pipe_async(at_least_once=True) inside transaction(): the transaction already "
                "commits the copy with the offset, or aborts both"
            )
        piped = self._pipe_message(topic, message)
        if at_least_once:
            return self._send_held(message, piped)
        return self.producer.produce_async(**piped)

    def _send_held(self, message: Message, produced: dict[str, Any]) -> DeliveryHandle:
        """Send ``produced`` and commit nothing at or past ``message`` until it is
        acknowledged (resent if it fails; see :meth:`pipe_async`)."""
        return self._executor.send_held(message.offset, produced, self.producer)

    def pipe_sync(self, *, topic: str, message: Message) -> DeliveryReport:
        """:meth:`pipe_async` and wait for the acknowledgement."""
        return self.producer.produce_sync(**self._pipe_message(topic, message))

    def pipe_many_async(self, *, topic: str, messages: Iterable[Message]) -> BatchDeliveryHandle:
        """Forward every message of ``messages`` to ``topic`` as one burst."""
        return self.producer.produce_many_async([self._pipe_message(topic, m) for m in messages])

    def pipe_many_sync(self, *, topic: str, messages: Iterable[Message]) -> list[DeliveryReport]:
        """:meth:`pipe_many_async` and wait for every acknowledgement."""
        return self.producer.produce_many_sync([self._pipe_message(topic, m) for m in messages])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {getattr(self, 'topic', '?')}/{getattr(self, 'partition', '?')}>"


def partition_handle(consumer: Consumer) -> PartitionHandle:
    """The engine's handle of the partition ``consumer`` serves (what its methods act
    through), for Conveyor's own parts. Internal: not API."""
    return consumer._executor


def attach_partition_handle(consumer: Consumer, handle: PartitionHandle) -> None:
    """Give ``consumer`` the ``handle`` of the partition it serves: the engine does as it
    makes the instance (a lane's handle, with virtual partitions), and so does
    :func:`conveyor.testing.consumer_for`. Internal: not API."""
    consumer._executor = handle


class TransactionBlock:
    """What :meth:`Consumer.transaction` returns: the block, as ``with`` in ``consume()`` or
    ``async with`` in ``async def consume()``; either gives the transactional producer."""

    __slots__ = ("_consumer", "_in_thread", "_on_loop")

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self._in_thread: AbstractContextManager[Producer] | None = None
        self._on_loop: AbstractAsyncContextManager[Producer] | None = None

    def __enter__(self) -> Producer:
        if _on_event_loop():
            raise ConfigurationError(
                "`with self.transaction():` in async def consume() would hold the event loop "
                "that the other lanes share while the broker answers: use "
                "`async with self.transaction():`",
                "transaction",
            )
        consumer = self._consumer
        seat = consumer._executor.joint_seat
        self._in_thread = (
            consumer._transaction_in_thread() if seat is None else consumer._joint_in_thread(seat)
        )
        return self._in_thread.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any
    ) -> bool | None:
        assert self._in_thread is not None
        return self._in_thread.__exit__(kind, error, traceback)

    async def __aenter__(self) -> Producer:
        consumer = self._consumer
        seat = consumer._executor.joint_seat
        self._on_loop = (
            consumer._transaction_on_loop() if seat is None else consumer._joint_on_loop(seat)
        )
        return await self._on_loop.__aenter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any
    ) -> bool | None:
        assert self._on_loop is not None
        return await self._on_loop.__aexit__(kind, error, traceback)


class _TransactionScope:
    """The offset one :meth:`Consumer.transaction` block marked (committed with it), and the
    metadata of its highest mark that gave one (``None``: the partition's, which sticks)."""

    __slots__ = ("executor", "metadata", "next_offset", "refused")

    def __init__(self, executor: PartitionHandle) -> None:
        self.executor = executor
        self.next_offset: int | None = None
        self.metadata: str | None = None
        self.refused = False
        """A mark came after the partition was revoked: the transaction must not commit."""

    def mark(self, next_offset: int, metadata: str | None) -> bool:
        if self.executor.revoked:
            self.refused = True
            return False
        highest = self.next_offset is None or next_offset >= self.next_offset
        if highest:
            self.next_offset = next_offset
        if metadata is not None and highest:
            self.metadata = metadata
        return True


def _not_metadata(metadata: object) -> ConfigurationError:
    return ConfigurationError(f"metadata must be a string, not {metadata!r}", "metadata")


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _declared(argument: Any) -> Any:
    """A type argument of ``Consumer[...]`` as a model: ``None`` for a type variable or ``Any``."""
    if isinstance(argument, typing.TypeVar) or argument is Any:
        return None
    return argument


def _consumer_arguments(cls: type) -> tuple[Any, ...]:
    """The arguments ``cls`` gives ``Consumer[...]`` in its own bases, through generic
    subclasses (``class Base(Consumer[Order, K], Generic[K])``, ``class X(Base[int])``: the
    key is ``int``); empty when its bases name no arguments."""
    for base in cls.__dict__.get("__orig_bases__", ()):
        origin = typing.get_origin(base)
        if origin is Consumer:
            return typing.get_args(base)
        if isinstance(origin, type) and issubclass(origin, Consumer):
            given = dict(
                zip(getattr(origin, "__parameters__", ()), typing.get_args(base), strict=False)
            )
            return tuple(given.get(argument, argument) for argument in _consumer_arguments(origin))
    return ()
