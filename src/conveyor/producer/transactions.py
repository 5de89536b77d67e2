"""Kafka transactions for a producer: ``with producer.transaction():`` in a thread and
``async with producer.transaction_async():`` in a coroutine.

librdkafka runs one transaction at a time per client, so the block holds a lock: other
threads and tasks that open one meanwhile wait for it to end. Who is inside the block is a
context variable, not the thread: on an event loop many tasks share one thread, and only
the task that opened the transaction produces in it (a produce from anywhere else on a
transactional producer runs in a transaction of its own, once the open one ended). The async
block waits for the lock and runs librdkafka's blocking calls (begin, commit, abort) on a
thread, so the loop keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from conveyor.errors import TransactionError
from conveyor.instrumentation import events as ev
from conveyor.messages import Message, Messages

if TYPE_CHECKING:
    from conveyor.driver.producers import ProducerClient
    from conveyor.instrumentation.monitor import Monitor

Offsets = Messages | Iterable[Message | tuple[str, int, int]]
"""What ``send_offsets`` takes: a batch (its last offset is committed), consumed messages (each
one's partition moves past it), or ``(topic, partition, next offset)`` triples."""

__all__ = ["Transactions", "off_the_loop", "open_transaction"]

_TIMEOUT = 30.0
"""Seconds one call of librdkafka's (initialize, commit, abort) may take."""
_ABORT_RESUMING = 120.0
"""Seconds an abort that timed out is called again before the client is given up (marked
fatal: the producer rebuilds it, and the successor's initialization fences the transaction).
A commit that timed out is called again until it ends: given up, it might still commit at the
coordinator while its batch is retried (the outputs twice); once the broker answers, librdkafka
says which it was (a commit that never reached the coordinator ends at
``transaction.timeout.ms``), and a closed client ends the wait."""

_blocks: contextvars.ContextVar[tuple[weakref.ref[Transactions], ...]] = contextvars.ContextVar(
    "conveyor-transaction-blocks", default=()
)
"""The transactions whose blocks the caller entered (only the still open ones count)."""

_RESUMABLE = "_TIMED_OUT"
"""The one error after which librdkafka goes on with a commit or abort in the background and
refuses every other transactional call (``_CONFLICT``) until the same call, made again, sees
it end."""


class Transactions:
    """The transaction state of one producer (``producer.transactions``)."""

    def __init__(
        self,
        enabled: bool,
        client: Callable[[], ProducerClient],
        monitor: Monitor,
        producer_id: str,
        report_error: Callable[[str, BaseException], None],
    ) -> None:
        """``client()`` gives the producer's client (a new one after a fatal error); the
        ``monitor``, the ``producer_id`` and ``report_error`` are the producer's own."""
        self.enabled = enabled
        self._client = client
        self._monitor = monitor
        self._producer_id = producer_id
        self._report_error = report_error
        self._in_use: ProducerClient | None = None  # the open transaction's client
        self._lock = threading.Lock()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # async blocks waiting for the lock, each woken by the next _release
        self._waiting_guard = threading.Lock()
        self._open: object | None = None  # the open transaction's token
        self._inside: contextvars.ContextVar[object | None] = contextvars.ContextVar(
            f"conveyor-transaction-{producer_id}", default=None
        )  # the token, in the context (thread or task) that opened it
        self._holding_loop: asyncio.AbstractEventLoop | None = None  # of an open async block
        self._initialized_for: object = None
        self._shared_started = 0.0  # when the open shared transaction began (perf_counter)
        self.on_first_begin: Callable[[], None] | None = None
        """Called once, when the first transaction begins (the app records it in its slot)."""

    def active(self) -> bool:
        """Whether the caller (its thread, or its task on an event loop) is inside the open
        transaction's block."""
        token = self._open
        return token is not None and self._inside.get() is token

    def needs_implicit(self) -> bool:
        """A transactional producer used outside a transaction block wraps the call in one."""
        return self.enabled and not self.active()

    def reset(self) -> None:
        """The client was rebuilt: the next transaction initializes it again."""
        self._initialized_for = None

    @contextmanager
    def transaction(self) -> Iterator[Transactions]:
        self._check_can_open()
        loop = _running_loop()
        if loop is not None and loop is self._holding_loop:
            raise TransactionError(
                "a transaction of this producer is open in another task of this event loop: "
                "waiting for it here would stop the loop it needs to finish; use "
                "`async with producer.transaction_async():`"
            )
        self._lock.acquire()
        try:
            inside = self._enter()
            # On a loop's thread, another task of the loop must not wait for this block there.
            self._holding_loop = loop
            started = time.perf_counter()
            try:
                client = self._in_use = self._begin()
                try:
                    yield self
                except BaseException as exc:
                    self._abort(client, started, exc)
                    raise
                self._commit(client, started)
            finally:
                self._leave(inside)
        finally:
            self._release()

    @asynccontextmanager
    async def transaction_async(self) -> AsyncIterator[Transactions]:
        """``producer.transaction()`` for a coroutine (see the module): the block is this task's
        alone; waiting for the lock, beginning, committing and aborting leave the loop free."""
        self._check_can_open()
        loop = asyncio.get_running_loop()
        await self._acquire(loop)
        inside = self._enter()
        self._holding_loop = loop
        started = time.perf_counter()
        try:
            begun = loop.run_in_executor(None, contextvars.copy_context().run, self._begin)
        except BaseException:  # the loop's executor is shut down
            self._leave(inside)
            self._release()
            raise
        try:
            client = self._in_use = await asyncio.shield(begun)
        except BaseException:
            # Cancelled while librdkafka begins (or begin failed): whoever finishes last lets
            # go of the lock, so that the next transaction cannot start under this one.
            self._forget_token(inside)
            begun.add_done_callback(lambda done: self._abandon(done, loop, started))
            raise
        try:
            yield self
        except BaseException as exc:
            await self._finish(loop, inside, self._abort, client, started, exc)
            raise
        await self._finish(loop, inside, self._commit, client, started)

    # -- one transaction that many blocks join (a consumer's ``transaction_interval``) -------

    def open_shared(self) -> None:
        """Begin a transaction that blocks in other threads and tasks join
        (:meth:`join_shared`) until :meth:`close_shared` commits or aborts it. It holds the
        producer's lock all that time: ``transaction()`` elsewhere waits for it to end."""
        if not self.enabled:
            raise TransactionError(
                'this producer is not transactional: set kafka["transactional.id"] to use transactions'
            )
        self._lock.acquire()
        try:
            self._open = object()
            self._shared_started = time.perf_counter()
            self._in_use = self._begin()
        except BaseException:
            self._leave(None)
            self._release()
            raise

    def join_shared(self) -> contextvars.Token[object | None]:
        """The caller (its thread, or its task) produces in the open shared transaction until
        :meth:`leave_shared` with the token returned."""
        token = self._open
        if token is None or self._in_use is None:
            raise TransactionError("no shared transaction is open to join")
        _blocks.set((*_still_open(), weakref.ref(self)))
        return self._inside.set(token)

    def leave_shared(self, joined: contextvars.Token[object | None]) -> None:
        """The caller no longer produces in the shared transaction."""
        self._forget_token(joined)

    def close_shared(self, commit: bool, cause: BaseException | None = None) -> None:
        """Commit (``commit``) or abort the shared transaction, then let go of the lock.

        Raises:
            TransactionError: the commit was refused (the transaction was aborted).
        """
        client = self._in_use
        try:
            if client is not None:
                if commit:
                    self._commit(client, self._shared_started)
                else:
                    self._abort(client, self._shared_started, cause or TransactionError("aborted"))
        finally:
            self._leave(None)
            self._release()

    def _check_can_open(self) -> None:
        if not self.enabled:
            raise TransactionError(
                'this producer is not transactional: set kafka["transactional.id"] to use transactions'
            )
        if self.active():
            raise TransactionError(
                "transactions do not nest: the caller is already inside producer.transaction()"
            )

    def _enter(self) -> contextvars.Token[object | None]:
        """With the lock held: a new transaction token, set in the caller's context."""
        token = self._open = object()
        _blocks.set((*_still_open(), weakref.ref(self)))
        return self._inside.set(token)

    def _leave(self, inside: contextvars.Token[object | None] | None) -> None:
        """End the open transaction's bookkeeping (the lock is let go by the caller)."""
        self._open = self._in_use = self._holding_loop = None
        if inside is not None:
            self._forget_token(inside)

    def _forget_token(self, inside: contextvars.Token[object | None]) -> None:
        # An async block finalised from another context (a garbage-collected generator, the
        # loop's shutdown_asyncgens) cannot reset its own context: there is none to reset.
        with contextlib.suppress(ValueError):
            self._inside.reset(inside)

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take the lock without blocking the loop (and without a thread per waiter): wait
        for a release's wake-up between tries. A waiter that is cancelled holds nothing."""
        while not self._lock.acquire(blocking=False):
            woken: asyncio.Future[None] = loop.create_future()
            with self._waiting_guard:
                self._waiting.append((loop, woken))
            # A release between the failed try and the registration woke nobody: try again.
            if self._lock.acquire(blocking=False):
                self._forget_waiter(woken)
                return
            try:
                await woken
            finally:
                self._forget_waiter(woken)

    def _forget_waiter(self, woken: asyncio.Future[None]) -> None:
        with self._waiting_guard:
            self._waiting = [entry for entry in self._waiting if entry[1] is not woken]

    def _release(self) -> None:
        """Let go of the lock and wake every async block waiting for it (they try again)."""
        self._lock.release()
        with self._waiting_guard:
            waiting, self._waiting = self._waiting, []
        for loop, woken in waiting:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                loop.call_soon_threadsafe(_wake, woken)

    async def _finish(
        self,
        loop: asyncio.AbstractEventLoop,
        inside: contextvars.Token[object | None],
        finish: Callable[..., None],
        *arguments: Any,
    ) -> None:
        """Commit or abort (``finish(*arguments)``) on a thread, then let go of the lock. A
        cancelled await does not cut it short: the thread finishes and lets go itself."""
        self._open = None  # the block is over: tasks it spawned no longer produce in it
        self._forget_token(inside)

        def run() -> None:
            try:
                finish(*arguments)
            finally:
                self._leave(None)
                self._release()

        try:
            finishing = loop.run_in_executor(None, run)
        except RuntimeError:  # the loop's executor is shut down: finish here
            run()
            return
        await asyncio.shield(finishing)

    def _abandon(
        self, begun: asyncio.Future[ProducerClient], loop: asyncio.AbstractEventLoop, started: float
    ) -> None:
        """An async block that never ran its body: abort what began, then let go of the lock."""
        client = None if begun.cancelled() or begun.exception() is not None else begun.result()

        def run() -> None:
            try:
                if client is not None:
                    self._abort(client, started, asyncio.CancelledError())
            finally:
                self._leave(None)
                self._release()

        if client is None:
            run()
            return
        try:
            loop.run_in_executor(None, run)
        except RuntimeError:  # the loop's executor is shut down: abort here
            run()

    def initialize(self, timeout: float = _TIMEOUT) -> None:
        """Initialize transactions now, not at the first one. Kafka then fences any older
        producer of the same ``transactional.id``: its open transaction is aborted at once.
        Does nothing while a transaction runs (the producer was initialized for it).

        Raises:
            TransactionError: the broker refused (the error names why).
        """
        if not self.enabled or not self._lock.acquire(blocking=False):
            return
        try:
            client = self._client()
            if self._initialized_for is not client:
                client.init_transactions(timeout)
                self._initialized_for = client
        finally:
            self._release()

    def send_offsets(
        self,
        offsets: Offsets,
        group_metadata: Any,
        timeout: float = _TIMEOUT,
        *,
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        """Commit consumer offsets as part of the current transaction (exactly-once pipelines).

        ``offsets`` is a :class:`~conveyor.messages.Messages` batch, consumed
        :class:`~conveyor.messages.Message` objects, or ``(topic, partition, next offset)``
        triples; for messages the offset committed is the one after each partition's highest.
        ``group_metadata`` is the consumer group's metadata (from the consumer's listener).
        ``metadata`` maps a ``(topic, partition)`` to the metadata string committed with its
        offset (the others commit none).

        Raises:
            TransactionError: no open transaction in the caller's block, or the broker refused.
        """
        client = self._in_use
        if not self.active() or client is None:
            raise TransactionError(
                "send_offsets needs an open transaction: call it inside the transaction's block"
            )
        client.send_offsets(_next_offsets(offsets), group_metadata, timeout, metadata)

    def _begin(self) -> ProducerClient:
        client = self._client()
        if self._initialized_for is not client:
            client.init_transactions(_TIMEOUT)
            self._initialized_for = client
        client.begin_transaction()
        first, self.on_first_begin = self.on_first_begin, None
        if first is not None:
            first()
        if ev.TRANSACTION_STARTED in self._monitor.subscribed:
            self._monitor.instrument(ev.TRANSACTION_STARTED, producer_id=self._producer_id)
        return client

    def _commit(self, client: ProducerClient, started: float) -> None:
        try:
            self._resumed(client, "commit")
        except TransactionError as failure:
            if failure.txn_requires_abort or not failure.fatal:
                self._abort(client, started, failure)
            raise
        if ev.TRANSACTION_COMMITTED in self._monitor.subscribed:
            self._monitor.instrument(
                ev.TRANSACTION_COMMITTED,
                producer_id=self._producer_id,
                duration=time.perf_counter() - started,
            )

    def _abort(self, client: ProducerClient, started: float, cause: BaseException) -> None:
        if client.fatal is None:  # a fatal client is rebuilt, and its successor fences this one
            try:
                self._resumed(client, "abort")
            except TransactionError as failure:
                self._report_error("transaction.abort.error", failure)
        if ev.TRANSACTION_ABORTED in self._monitor.subscribed:
            self._monitor.instrument(
                ev.TRANSACTION_ABORTED,
                producer_id=self._producer_id,
                duration=time.perf_counter() - started,
                error=cause,
            )

    def _resumed(self, client: ProducerClient, verb: str) -> None:
        """``client``'s commit or abort (``verb``), made again while it times out (each time
        reported as ``transaction.<verb>.timeout``): a commit until it ends, an abort for up
        to :data:`_ABORT_RESUMING` seconds, after which the client is marked fatal and the
        timeout raised."""
        deadline = time.monotonic() + _ABORT_RESUMING
        while True:
            try:
                if verb == "commit":
                    client.commit_transaction(_TIMEOUT)
                else:
                    client.abort_transaction(max(1.0, min(_TIMEOUT, deadline - time.monotonic())))
                return
            except TransactionError as failure:
                if failure.name != _RESUMABLE or failure.fatal or failure.txn_requires_abort:
                    raise
                if verb == "abort" and time.monotonic() >= deadline:
                    client.mark_fatal(failure)
                    raise
                self._report_error(f"transaction.{verb}.timeout", failure)


async def off_the_loop(function: Callable[..., Any], *arguments: Any) -> Any:
    """``function(*arguments)`` on a thread (in the caller's context); a cancelled await still
    waits for it to end before the cancellation goes on, so that what comes next (an abort)
    never runs beside it."""
    running = asyncio.ensure_future(asyncio.to_thread(function, *arguments))
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(running)
        except asyncio.CancelledError:
            if running.done():
                raise
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result


def open_transaction() -> Transactions | None:
    """The transaction whose block the caller (its thread, or its task on an event loop) is
    inside, or ``None`` (for features that join the caller's transaction: a job enqueued in
    a consumer's ``with self.transaction():``)."""
    found = _still_open()
    return found[-1]() if found else None


def _still_open() -> tuple[weakref.ref[Transactions], ...]:
    return tuple(ref for ref in _blocks.get() if (held := ref()) is not None and held.active())


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _next_offsets(offsets: Offsets) -> list[tuple[str, int, int]]:
    """``(topic, partition, next offset)`` per partition: one past the highest offset given."""
    highest: dict[tuple[str, int], int] = {}
    if isinstance(offsets, Messages):
        offsets = [offsets.last] if len(offsets) else []
    for item in offsets:
        if isinstance(item, Message):
            key, next_offset = (item.topic, item.partition), item.offset + 1
        else:
            topic, partition, next_offset = item
            key = (topic, partition)
        if next_offset > highest.get(key, -1):
            highest[key] = next_offset
    return [(topic, partition, offset) for (topic, partition), offset in highest.items()]
