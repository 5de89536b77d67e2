"""Producing without a broker: the app's producers keep what they are given instead of
sending it.

:func:`capture` gives an app producers whose librdkafka client is replaced by
:class:`CaptureClient`. Everything above the client is Conveyor's own producer (checks,
serializer, middleware, partition keys, send hooks, transactions, delivery handles), so a
message a test sees captured is the message the app would have sent. Each one is
"acknowledged" at once with the next offset of its partition.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from conveyor.driver.handles import AcknowledgedHandle, DeliveryHandle
from conveyor.errors import ConveyorError, DeliveryError
from conveyor.messages import Deserializers, Message
from conveyor.producer import Producer
from conveyor.producer.partitioners import Partitioner, partitioner_for
from conveyor.records import Record, as_bytes, raw_headers

if TYPE_CHECKING:
    from conveyor.testing.host import AppUnderTest

__all__ = ["CaptureClient", "Captured", "CapturingProducer", "capture", "produced"]

_DEFAULT_PARTITIONER = partitioner_for("consistent_random")


class Captured:
    """What an app's producers were given in a test, in the order they were given it.

    ``records`` holds what a ``read_committed`` reader would see: messages produced outside a
    transaction, and those of committed transactions (at commit). ``aborted`` holds those of
    aborted transactions; ``offsets`` the consumer offsets committed with transactions, as
    ``(topic, partition, next offset)``.
    """

    def __init__(self, declared: Callable[[str], int | None] = lambda topic: None) -> None:
        self.partitions: dict[str, int] = {}
        """Partition counts the test gave (see :func:`capture`)."""
        self._declared = declared
        self.records: list[Record] = []
        self.aborted: list[Record] = []
        self.offsets: list[tuple[str, int, int]] = []
        self.lock = threading.Lock()
        self._next_offset: dict[tuple[str, int], int] = {}
        self._round_robin: dict[str, int] = {}

    def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has here: as the test said, else as its route
        declares, else 1."""
        return self.partitions.get(topic) or self._declared(topic) or 1

    def clear(self) -> None:
        """Forget everything captured (offsets start again from 0)."""
        with self.lock:
            self.records.clear()
            self.aborted.clear()
            self.offsets.clear()
            self._next_offset.clear()
            self._round_robin.clear()

    def record(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None,
        partition: int,
        timestamp: int,
        headers: Any,
        partitioner: Partitioner = _DEFAULT_PARTITIONER,
    ) -> Record:
        """Place a message in its partition (a keyed one where the producer's ``partitioner``
        puts it, one without a key round robin) and give it the partition's next offset."""
        count = self.partition_count(topic)
        raw_key = as_bytes(key)
        with self.lock:
            if partition < 0:
                if raw_key is not None:
                    partition = partitioner(raw_key, count)
                else:
                    partition = self._round_robin.get(topic, 0) % count
                    self._round_robin[topic] = partition + 1
            elif partition >= count:
                failure = DeliveryError(
                    f"{topic!r} has {count} partition(s) here, no partition {partition} "
                    "(tell testing.capture(app, partitions={...}) how many it has)",
                    name="_UNKNOWN_PARTITION",
                )
                failure.topic, failure.partition = topic, partition
                raise failure
            offset = self._next_offset.get((topic, partition), 0)
            self._next_offset[(topic, partition)] = offset + 1
        return Record(
            topic,
            partition,
            offset,
            as_bytes(value),
            raw_key,
            raw_headers(headers),
            timestamp or None,
        )


class _Idle:
    """The poller of a client whose reports are served as soon as a message is given."""

    parked = False

    def wake(self) -> None:
        return None

    def note_served(self) -> None:
        return None

    def stop(self, timeout: float = 5.0) -> None:
        return None


class CaptureClient:
    """Stands where Conveyor's librdkafka producer client stands, and keeps each message in a
    :class:`Captured` instead of sending it (delivery reported at once, on the caller's
    thread). In a transaction its messages wait for the commit (or go to ``aborted``)."""

    def __init__(self, captured: Captured, partitioner: Partitioner) -> None:
        self.captured = captured
        self.partitioner = partitioner
        self.fatal: Any = None
        self.credentials_refused: Any = None
        self.poller = _Idle()
        self.plain_handle: type[DeliveryHandle] = DeliveryHandle
        self.acknowledged_handle: type[DeliveryHandle] = AcknowledgedHandle
        self.clarify: Any = None  # nothing to ask: delivery is reported at once
        self._transaction: list[Record] | None = None
        self._offsets: list[tuple[str, int, int]] = []

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        on_delivery: Callable[[Any, Any], None] | None = None,
        _opaque: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        record = self.captured.record(
            topic, value, key, partition, timestamp, headers, self.partitioner
        )
        with self.captured.lock:
            if self._transaction is not None:
                self._transaction.append(record)
            else:
                self.captured.records.append(record)
        if on_delivery is not None:
            on_delivery(None, record)

    def lead(self, done: Callable[[], bool], deadline: float) -> bool:
        return True  # every report is in already

    def handed_over(self) -> None:
        return None  # reported at once: nothing to serve later

    def serve(self, timeout: float) -> int:
        return 0

    def partition_count(self, topic: str) -> int:
        return self.captured.partition_count(topic)

    def refused(self, exc: Exception, topic: str) -> Exception:
        if isinstance(exc, ConveyorError):
            return exc
        failure = DeliveryError(f"could not capture a message for {topic!r}: {exc}")
        failure.topic = topic
        return failure

    def __len__(self) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0

    def close(self, timeout: float) -> int:
        return 0

    # -- transactions -------------------------------------------------------------------------

    def init_transactions(self, timeout: float) -> None:
        return None

    def begin_transaction(self) -> None:
        self._transaction, self._offsets = [], []

    def send_offsets(
        self,
        offsets: Iterable[tuple[str, int, int]],
        group_metadata: Any,
        timeout: float,
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        self._offsets.extend(offsets)

    def commit_transaction(self, timeout: float) -> None:
        with self.captured.lock:
            self.captured.records.extend(self._transaction or ())
            self.captured.offsets.extend(self._offsets)
        self._transaction, self._offsets = None, []

    def abort_transaction(self, timeout: float) -> None:
        with self.captured.lock:
            self.captured.aborted.extend(self._transaction or ())
        self._transaction, self._offsets = None, []


class CapturingProducer(Producer):
    """A :class:`~conveyor.Producer` that captures into ``captured`` instead of sending."""

    def __init__(
        self, kafka: Mapping[str, Any] | None = None, *, captured: Captured, **options: Any
    ) -> None:
        self.captured = captured
        super().__init__(kafka, **options)

    def _new_client(self, config: Mapping[str, Any], name: str) -> Any:
        client = CaptureClient(
            self.captured, partitioner_for(str(config.get("partitioner", "consistent_random")))
        )
        observer = self._send_path.observer
        client.plain_handle = DeliveryHandle.bound_to(observer, self._explain, client.lead)
        client.acknowledged_handle = AcknowledgedHandle.bound_to(
            observer, self._explain, client.lead
        )
        return client


_captures: weakref.WeakKeyDictionary[AppUnderTest, Captured] = weakref.WeakKeyDictionary()
_captures_lock = threading.Lock()


def capture(app: AppUnderTest, partitions: Mapping[str, int] | None = None) -> Captured:
    """Make ``app``'s producer (and its transactional producer) capture what they are given
    instead of sending it, and return what they captured so far. Calling it again returns the
    same :class:`Captured` (``partitions`` are added to what it knows).

    ``partitions`` says how many partitions topics have (for keyed messages and
    ``partition_key``); a topic not named there has what its route declares, else 1.
    """
    with _captures_lock:
        found = _captures.get(app)
        if found is None:
            found = Captured(partial(_declared_partitions, weakref.ref(app)))
            _install(app, found)
            _captures[app] = found
        found.partitions.update(partitions or {})
        return found


def _declared_partitions(app_ref: weakref.ref[AppUnderTest], topic: str) -> int | None:
    app = app_ref()  # a weak reference: what an app captured must not keep the app alive
    routes = app.routes.find(topic) if app is not None else []
    return next((route.partitions for route in routes if route.partitions), None)


def _install(app: AppUnderTest, captured: Captured) -> None:
    """From now on the app makes producers that capture (with the settings it always uses);
    those made before the test captured are closed, nothing of them kept."""
    app.make_producers_with(partial(CapturingProducer, captured=captured))


def produced(app: AppUnderTest, topic: str | None = None) -> list[Message]:
    """The messages ``app``'s producers were given (committed ones, for transactions), in
    order, as :class:`~conveyor.Message` objects: ``payload``, ``key`` and ``headers`` decoded
    by the route of their topic when the app consumes it (else JSON, UTF-8 and a dict), the
    raw bytes in ``raw_payload``, ``raw_key``, ``raw_headers``; ``topic`` keeps one topic's."""
    store = capture(app)
    with store.lock:
        records = [r for r in store.records if topic is None or r.topic() == topic]
    return [Message(record, _deserializers(app, record.topic())) for record in records]


def _deserializers(app: AppUnderTest, topic: str) -> Deserializers:
    for route in app.routes:
        if route.name == topic or (route.pattern is not None and route.matches(topic)):
            return route.deserializers
    return Deserializers()
