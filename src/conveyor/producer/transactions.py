"""Kafka transactions for a producer: ``with producer.transaction():``.

librdkafka runs one transaction at a time per client, so the block holds a lock:
other threads that produce meanwhile wait for it to end (their messages would
otherwise join a transaction they know nothing of). A produce outside any block
on a transactional producer runs in a transaction of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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

__all__ = ["Transactions"]

_TIMEOUT = 30.0


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
        self._owner: int | None = None
        self._initialized_for: object = None
        self.on_first_begin: Callable[[], None] | None = None
        """Called once, when the first transaction begins (the app records it in its slot)."""

    def active(self) -> bool:
        """Whether the calling thread is inside ``with producer.transaction():``."""
        return self._owner == threading.get_ident()

    def needs_implicit(self) -> bool:
        """A transactional producer used outside a transaction block wraps the call in one."""
        return self.enabled and self._owner != threading.get_ident()

    def reset(self) -> None:
        """The client was rebuilt: the next transaction initializes it again."""
        self._initialized_for = None

    @contextmanager
    def transaction(self) -> Iterator[Transactions]:
        if not self.enabled:
            raise TransactionError(
                'this producer is not transactional: set kafka["transactional.id"] to use transactions'
            )
        if self._owner == threading.get_ident():
            raise TransactionError(
                "transactions do not nest: this thread is already inside producer.transaction()"
            )
        with self._lock:
            self._owner = threading.get_ident()
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
                self._owner = self._in_use = None

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
            self._lock.release()

    def send_offsets(
        self, offsets: Offsets, group_metadata: Any, timeout: float = _TIMEOUT
    ) -> None:
        """Commit consumer offsets as part of the current transaction (exactly-once pipelines).

        ``offsets`` is a :class:`~conveyor.messages.Messages` batch, consumed
        :class:`~conveyor.messages.Message` objects, or ``(topic, partition, next offset)``
        triples; for messages the offset committed is the one after each partition's highest.
        ``group_metadata`` is the consumer group's metadata (from the consumer's listener).

        Raises:
            TransactionError: no open transaction in this thread, or the broker refused.
        """
        client = self._in_use
        if not self.active() or client is None:
            raise TransactionError("send_offsets needs an open transaction in this thread")
        client.send_offsets(_next_offsets(offsets), group_metadata, timeout)

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
            client.commit_transaction(_TIMEOUT)
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
                client.abort_transaction(_TIMEOUT)
            except TransactionError as failure:
                self._report_error("transaction.abort.error", failure)
        if ev.TRANSACTION_ABORTED in self._monitor.subscribed:
            self._monitor.instrument(
                ev.TRANSACTION_ABORTED, producer_id=self._producer_id,
                duration=time.perf_counter() - started, error=cause,
            )  # fmt: skip


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
