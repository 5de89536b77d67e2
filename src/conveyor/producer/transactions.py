"""Kafka transactions for a producer: ``with producer.transaction():``.

librdkafka runs one transaction at a time per client, so the block holds a lock:
other threads that produce meanwhile wait for it to end (their messages would
otherwise join a transaction they know nothing of). A produce outside any block
on a transactional producer runs in a transaction of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from conveyor.driver.errors import to_conveyor_error
from conveyor.errors import ConveyorError, TransactionError
from conveyor.instrumentation import events as ev

if TYPE_CHECKING:
    from conveyor.producer.producer import Producer

__all__ = ["Transactions"]

_TIMEOUT = 30.0


class Transactions:
    """The transaction state of one producer (``producer.transactions``)."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self.enabled = producer.settings.transactional
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._initialized_for: object = None

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
        producer = self._producer
        with self._lock:
            self._owner = threading.get_ident()
            started = time.perf_counter()
            try:
                kafka = self._begin()
                try:
                    yield self
                except BaseException as exc:
                    self._abort(kafka, started, exc)
                    raise
                self._commit(kafka, started)
            finally:
                self._owner = None
        del producer

    def send_offsets(self, offsets: Any, group_metadata: Any, timeout: float = _TIMEOUT) -> None:
        """Commit consumer offsets as part of the current transaction (exactly-once pipelines)."""
        if not self.active():
            raise TransactionError("send_offsets needs an open transaction in this thread")
        try:
            self._producer._client.kafka.send_offsets_to_transaction(
                offsets, group_metadata, timeout
            )
        except Exception as exc:
            raise self._error(exc, "could not add the offsets to the transaction: ") from exc

    def _begin(self) -> Any:
        producer = self._producer
        client = producer._active_client()
        kafka = client.kafka
        try:
            if self._initialized_for is not kafka:
                kafka.init_transactions(_TIMEOUT)
                self._initialized_for = kafka
            kafka.begin_transaction()
        except Exception as exc:
            raise self._error(exc, "could not begin a transaction: ") from exc
        if ev.TRANSACTION_STARTED in producer.monitor.subscribed:
            producer.monitor.instrument(ev.TRANSACTION_STARTED, producer_id=producer.id)
        return kafka

    def _commit(self, kafka: Any, started: float) -> None:
        producer = self._producer
        try:
            kafka.commit_transaction(_TIMEOUT)
        except Exception as exc:
            failure = self._error(exc, "could not commit the transaction: ")
            if failure.txn_requires_abort or not failure.fatal:
                self._abort(kafka, started, failure)
            raise failure from exc
        if ev.TRANSACTION_COMMITTED in producer.monitor.subscribed:
            producer.monitor.instrument(
                ev.TRANSACTION_COMMITTED,
                producer_id=producer.id,
                duration=time.perf_counter() - started,
            )

    def _abort(self, kafka: Any, started: float, cause: BaseException) -> None:
        producer = self._producer
        try:
            kafka.abort_transaction(_TIMEOUT)
        except Exception as exc:
            failure = self._error(exc, "could not abort the transaction: ")
            producer._report_error("transaction.abort.error", failure)
        if ev.TRANSACTION_ABORTED in producer.monitor.subscribed:
            producer.monitor.instrument(
                ev.TRANSACTION_ABORTED, producer_id=producer.id,
                duration=time.perf_counter() - started, error=cause,
            )  # fmt: skip

    def _error(self, exc: Exception, context: str) -> TransactionError:
        if isinstance(exc, TransactionError):
            return exc
        if isinstance(exc, ConveyorError):
            return TransactionError(f"{context}{exc}")
        failure = to_conveyor_error(exc, TransactionError, context=context)
        if failure.fatal:  # fenced, or the coordinator gave up on us: rebuild before the next use
            self._producer._client.mark_fatal(failure)
        return failure
