"""``SendPath``: what every send of one producer reads (its state, serializer, size limit,
partitioner, middleware, send hooks, transactions, the room in librdkafka's queue) and the
sends themselves: check a message and hand it to librdkafka on the client it is given.

A :class:`~conveyor.producer.Producer` owns one; its variants share it, each sending on its
own client. The hot path of every produce: it reaches librdkafka's own bound method with
positional arguments and allocates nothing for the common shapes of a message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.driver import BatchDeliveryHandle
from conveyor.driver.producers import PURGED
from conveyor.errors import (
    InvalidMessageError,
    ProducerClosedError,
    ProducerForkedError,
    QueueFullError,
)
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.producer.messages import (
    MESSAGE_FIELDS,
    check_message,
    check_topic,
    encode_headers,
    encode_key,
    encode_partition,
    encode_payload,
    encode_timestamp,
)
from conveyor.producer.partitioners import partitioner_for
from conveyor.producer.send_hooks import Hooked

if TYPE_CHECKING:
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.driver.producers import ProducerClient
    from conveyor.errors import DeliveryError
    from conveyor.instrumentation.monitor import Monitor
    from conveyor.producer.send_hooks import SendHook
    from conveyor.producer.settings import Middleware, ProducerSettings
    from conveyor.producer.transactions import Transactions

__all__ = ["CLOSED", "FORKED", "OPEN", "SendPath"]

OPEN, CLOSED, FORKED = "open", "closed", "forked"
_ACKNOWLEDGED = ev.MESSAGE_ACKNOWLEDGED
_PRODUCED_ASYNC = ev.MESSAGE_PRODUCED_ASYNC
# A producing thread serves the delivery reports already queued every this many messages,
# while it holds the GIL anyway. Left to the poller thread alone, librdkafka wakes it for
# each small batch of reports and every wake-up is a hand-off of the GIL between threads:
# measured as ~1.5x the CPU per message of a bare loop (which calls poll(0) as it goes), and
# produce_many_async at 0.8x of it instead of 0.92x.
_SERVE_EVERY = 128
# How long a thread waiting for room in a full queue sleeps at most between re-checks,
# should a delivery report's signal have come just before it started waiting.
_ROOM_RECHECK = 0.05

_log = logging.getLogger("conveyor.producer")
_hook_failures = RateLimitedLog(_log)


class SendPath:
    """The state every send of one producer reads, and the sends (see the module); shared by
    the producer and its variants, each of which passes the client it sends on."""

    def __init__(
        self,
        settings: ProducerSettings,
        monitor: Monitor,
        producer_id: str,
        transactions: Transactions,
        *,
        default_wait: float,
        replace_failed: Callable[[ProducerClient], ProducerClient],
        explain: Callable[[DeliveryError], DeliveryError],
    ) -> None:
        """``default_wait``: seconds a send waits for its report when the caller gave no
        timeout; ``replace_failed(client)``: the client to send on instead of ``client``,
        which hit a fatal error (the producer's own is rebuilt; a variant's raises the
        error); ``explain``: the producer's account of a failed delivery."""
        self.producer_id = producer_id
        self.monitor = monitor
        self.transactions = transactions
        self.transactional = transactions.enabled
        self.state = OPEN
        """``OPEN``, ``CLOSED`` (by ``close()``) or ``FORKED`` (seen in a forked child)."""
        self.middleware: list[Middleware] = list(settings.middleware)
        self.max_bytes = settings.max_message_bytes
        self.serializer = settings.serializer
        self.partitioner = partitioner_for(settings.partitioner)
        self.send_hooks: tuple[SendHook, ...] = ()
        self.unserved = 0
        """Messages sent since a producing thread last served the queued reports."""
        self.default_wait = default_wait
        self.queue_full_timeout = settings.queue_full_timeout
        self.replace_failed = replace_failed
        self.explain = explain
        self._room = threading.Condition()
        self._room_waiters = 0

    # -- the sends ----------------------------------------------------------------------------

    def send(
        self,
        client: ProducerClient,
        topic: str,
        payload: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        partition_key: Any,
        timestamp: Any,
        label: Any,
    ) -> tuple[DeliveryHandle, ProducerClient]:
        """Check one message and hand it to librdkafka on ``client`` (or the one that replaced
        it): its handle and the client it went to (positional: this is the hot path of every
        produce)."""
        if self.state is not OPEN:
            self.raise_unusable()
        if self.middleware or self.transactional or partition_key is not None:
            message = {
                "topic": topic,
                "payload": payload,
                "key": key,
                "headers": headers,
                "partition": partition,
                "partition_key": partition_key,
                "timestamp": timestamp,
                "label": label,
            }
            return self._send_message(client, message)
        # The hot path, inlined: a bytes payload and nothing else set costs a few checks.
        if type(topic) is not str or not topic:
            topic = check_topic(topic)
        if type(payload) is not bytes or len(payload) > self.max_bytes:
            payload = encode_payload(payload, self.serializer, self.max_bytes)
        if key is not None and type(key) is not bytes and type(key) is not str:
            key = encode_key(key)
        if headers is not None:
            headers = encode_headers(headers)
        if client.fatal is not None:
            client = self.active(client)
        subscribed = self.monitor.subscribed
        handle = (
            client.acknowledged_handle if _ACKNOWLEDGED in subscribed else client.plain_handle
        )()
        handle._fields = None
        handle._label = label  # always set: reading an unset slot raises (measurably slow)
        partition = -1 if partition is None else encode_partition(partition)
        if timestamp is not None:
            timestamp = encode_timestamp(timestamp)
        if self.send_hooks:  # tracing, latency stamps: here, not on the general path (~5 us)
            self._send_hooked(client, topic, payload, key, partition, handle, timestamp, headers)
        else:
            try:
                # Positional on purpose: keyword arguments cost confluent-kafka a dict per call.
                client.produce(
                    topic, payload, key, partition, handle, None, timestamp or 0, headers
                )
            except BufferError:
                self._produce_when_room(
                    client, (topic, payload, key, partition, handle, None, timestamp or 0, headers)
                )
            except Exception as exc:
                raise client.refused(exc, topic) from exc
        self.unserved += 1
        if self.unserved >= _SERVE_EVERY:  # see send_many (a heuristic count)
            self.unserved = 0
            client.serve(0)
        if _PRODUCED_ASYNC in subscribed:
            self.monitor.instrument(
                _PRODUCED_ASYNC, producer_id=self.producer_id, topic=topic, key=key, label=label
            )
        return handle, client

    def send_many(
        self, client: ProducerClient, messages: Iterable[Mapping[str, Any]], reports: bool
    ) -> BatchDeliveryHandle:
        """Check every message, then hand them all to ``client`` (or the one that replaced it)
        as one burst (see ``produce_many_async``)."""
        if self.state is not OPEN:
            self.raise_unusable()
        if self.transactions.needs_implicit():
            with self.transactions.transaction():
                return self.send_many(client, messages, reports)
        started = time.perf_counter()
        client = self.active(client)
        if type(messages) is not list:
            messages = list(messages)
        # One checking pass that allocates nothing for the common shapes ({"topic", "payload"
        # [, "key"]}); only messages off those shapes are prepared in full (``special``).
        special = self._check_many(messages, client)
        count = len(messages)
        batch = BatchDeliveryHandle(
            count,
            self.observer,
            every=ev.MESSAGE_ACKNOWLEDGED in self.monitor.subscribed,
            keep_reports=reports,
            explain=self.explain,
            lead=client.lead,
            clarify=client.clarify,  # the client's, as its handles have it
        )
        shared = batch.shared_callback()
        produce = client.produce
        sent = 0
        topic = ""
        hooked: Hooked | None = None
        try:
            if special is None:
                serve = client.serve
                for message in messages:
                    topic = message["topic"]
                    payload, key = message["payload"], message.get("key")
                    try:
                        produce(topic, payload, key, -1, shared)
                    except BufferError:
                        self._produce_when_room(client, (topic, payload, key, -1, shared))
                    sent += 1
                    if not sent % _SERVE_EVERY:
                        serve(0)
            else:
                for message in messages:
                    fields = special.get(sent)
                    hooked = None
                    if fields is None:
                        topic = message["topic"]
                        payload, key = message["payload"], message.get("key")
                        arguments: tuple[Any, ...] = (topic, payload, key, -1, shared)
                    else:
                        topic = fields[0]
                        arguments, hooked = self._full_arguments(fields, shared, batch)
                    try:
                        try:
                            produce(*arguments)
                        except BufferError:
                            self._produce_when_room(client, arguments)
                    except Exception as exc:
                        if hooked is not None:  # never queued: no report will end its hooks
                            hooked.fail(exc)
                        raise
                    sent += 1
        except Exception as exc:
            batch.truncate(sent)
            exc.handle = batch  # type: ignore[attr-defined]
            if isinstance(exc, QueueFullError | InvalidMessageError):
                raise
            raise client.refused(exc, topic) from exc
        client.serve(0)
        client.handed_over()
        if ev.MESSAGES_PRODUCED_ASYNC in self.monitor.subscribed:
            self.monitor.instrument(
                ev.MESSAGES_PRODUCED_ASYNC,
                producer_id=self.producer_id,
                count=count,
                duration=time.perf_counter() - started,
            )
        return batch

    # -- what the producer asks of it ---------------------------------------------------------

    def active(self, client: ProducerClient) -> ProducerClient:
        """``client`` if it can send, else the client that replaced it (see ``replace_failed``).

        Raises:
            AuthenticationError: Kafka refused the client's credentials.
        """
        if client.credentials_refused is not None:
            raise client.credentials_refused
        if client.fatal is not None:
            client = self.replace_failed(client)
        return client

    def raise_unusable(self) -> None:
        """Raise what a send on a producer that is not ``OPEN`` raises.

        Raises:
            ProducerClosedError: the producer was closed.
            ProducerForkedError: the producer was made before this process was forked.
        """
        if self.state is CLOSED:
            raise ProducerClosedError(
                f"producer {self.producer_id!r} is closed; create a new one to produce"
            )
        if self.state is FORKED:
            raise ProducerForkedError(
                f"producer {self.producer_id!r} was created in another process before os.fork(); librdkafka "
                "clients do not survive fork(). Create the producer in this process (after the fork)."
            )

    def wait_timeout(self, timeout: float | None) -> float:
        """Seconds to wait for reports: ``timeout``, else the producer's default."""
        return self.default_wait if timeout is None else timeout

    def apply_middleware(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """``message`` checked, then changed by each middleware in order (each result checked)."""
        current = check_message(dict(message))
        for step in list(self.middleware):
            result = step(current)
            if result is not None:
                current = check_message(result)
        return current

    def observer(
        self, topic: str, partition: int, offset: int, failure: DeliveryError | None, label: Any
    ) -> None:
        """Tell the monitor how a delivery went (what its subscribers asked to hear of)."""
        subscribed = self.monitor.subscribed
        if failure is None:
            if ev.MESSAGE_ACKNOWLEDGED in subscribed:
                self.monitor.instrument(
                    ev.MESSAGE_ACKNOWLEDGED,
                    producer_id=self.producer_id,
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    label=label,
                )
            return
        if failure.code in PURGED:
            if ev.MESSAGE_PURGED in subscribed:
                self.monitor.instrument(
                    ev.MESSAGE_PURGED,
                    producer_id=self.producer_id,
                    topic=topic,
                    error=failure,
                    label=label,
                )
            return
        if ev.ERROR_OCCURRED in subscribed:
            self.monitor.instrument(
                ev.ERROR_OCCURRED,
                type="producer.delivery.error",
                producer_id=self.producer_id,
                topic=topic,
                partition=partition,
                error=failure,
                label=label,
            )

    def wake_room_waiters(self) -> None:
        """Delivery reports were served: threads waiting for room in a full queue try again."""
        if self._room_waiters:
            with self._room:
                self._room.notify_all()

    def release_room_waiters(self) -> None:
        """The producer closed: every thread waiting for room wakes (and raises)."""
        with self._room:
            self._room.notify_all()

    # -- internals ----------------------------------------------------------------------------

    def _send_message(
        self, client: ProducerClient, message: dict[str, Any]
    ) -> tuple[DeliveryHandle, ProducerClient]:
        """The general path: middleware, partition_key, implicit transactions."""
        if self.transactions.needs_implicit():
            with self.transactions.transaction():
                return self._send_message(client, message)
        client = self.active(client)
        topic, payload, key, partition, timestamp, headers, label = self._prepare(message, client)
        handle = self._new_handle(client, label)
        if self.send_hooks:
            self._send_hooked(client, topic, payload, key, partition, handle, timestamp, headers)
        else:
            self._dispatch(client, topic, payload, key, partition, handle, timestamp, headers)
        # As on the hot path: without it the poller thread woke for every delivery report,
        # and those GIL hand-offs cost a traced (or any hooked) message ~0.2 ms of e2e p50.
        self.unserved += 1
        if self.unserved >= _SERVE_EVERY:
            self.unserved = 0
            client.serve(0)
        if ev.MESSAGE_PRODUCED_ASYNC in self.monitor.subscribed:
            self.monitor.instrument(
                ev.MESSAGE_PRODUCED_ASYNC,
                producer_id=self.producer_id,
                topic=topic,
                key=key,
                label=label,
            )
        return handle, client

    def _send_hooked(
        self,
        client: ProducerClient,
        topic: str,
        payload: Any,
        key: Any,
        partition: int,
        handle: DeliveryHandle,
        timestamp: int | None,
        headers: Any,
    ) -> None:
        """Hand one checked message to librdkafka after the send hooks ran on it."""
        headers, hooked = self._hook(topic, key, partition, headers, handle)
        try:
            self._dispatch(
                client, topic, payload, key, partition, hooked or handle, timestamp or 0, headers
            )
        except Exception as exc:
            if hooked is not None:
                hooked.fail(exc)
            raise

    def _hook(
        self,
        topic: str,
        key: Any,
        partition: int,
        headers: list[tuple[str, Any]] | None,
        callback: Callable[[Any, Any], None],
    ) -> tuple[list[tuple[str, Any]] | None, Hooked | None]:
        """Run the send hooks: the headers to send, and the delivery callback that lets the
        hooks finish before ``callback`` (``None`` when no hook asked to hear of it)."""
        finishers = []
        for hook in self.send_hooks:
            try:
                headers, finish = hook.sending(topic, key, partition, headers)
            except Exception as error:  # a hook (tracing, stamps) never stops a message
                _hook_failures.log(
                    logging.ERROR,
                    repr(hook),
                    "send hook %r failed (%r); sending without it",
                    hook,
                    error,
                )
                continue
            if finish is not None:
                finishers.append(finish)
        return headers, Hooked(callback, tuple(finishers)) if finishers else None

    def _check_many(
        self, messages: list[Mapping[str, Any]], client: ProducerClient
    ) -> dict[int, tuple[Any, ...]] | None:
        """Check every message of a burst (raising before anything is sent). Returns the full
        preparation of the messages that are not of a common shape, by index, or ``None``
        when all are ``{"topic": str, "payload": bytes[, "key": str | bytes | None]}`` dicts
        (checked here without allocating anything per message)."""
        if self.middleware or self.send_hooks:
            return {index: self._prepare(message, client) for index, message in enumerate(messages)}
        special: dict[int, tuple[Any, ...]] | None = None
        max_bytes = self.max_bytes
        index = 0
        for message in messages:
            if type(message) is dict:
                size = len(message)
                topic = message.get("topic")
                payload = message.get("payload")
                if (
                    type(topic) is str
                    and topic
                    and type(payload) is bytes
                    and len(payload) <= max_bytes
                    and (
                        size == 2
                        or (
                            size == 3
                            and "key" in message
                            and (
                                (key := message["key"]) is None
                                or type(key) is str
                                or type(key) is bytes
                            )
                        )
                    )
                ):
                    index += 1
                    continue
            if special is None:
                special = {}
            special[index] = self._prepare(message, client)
            index += 1
        return special

    def _prepare(self, message: Mapping[str, Any], client: ProducerClient) -> tuple[Any, ...]:
        """One message checked and encoded: librdkafka's fields and its label."""
        if self.middleware:
            message = self.apply_middleware(message)
        elif type(message) is not dict:
            message = (
                check_message(dict(message))
                if isinstance(message, Mapping)
                else check_message(message)
            )
        topic = message.get("topic")
        if type(topic) is not str or not topic:
            topic = check_topic(topic)
        payload = message.get("payload")
        if type(payload) is not bytes or len(payload) > self.max_bytes:
            payload = encode_payload(payload, self.serializer, self.max_bytes)
        key = message.get("key")
        if key is not None and type(key) is not bytes and type(key) is not str:
            key = encode_key(key)
        headers = message.get("headers")
        if headers is not None:
            headers = encode_headers(headers)
        partition = message.get("partition")
        partition = -1 if partition is None else encode_partition(partition)
        partition_key = message.get("partition_key")
        if partition_key is not None:
            if partition != -1:
                raise InvalidMessageError(
                    "give partition or partition_key, not both", "partition_key"
                )
            raw = encode_key(partition_key, "partition_key")
            raw_bytes = raw.encode() if type(raw) is str else raw
            partition = self.partitioner(raw_bytes, client.partition_count(topic))  # type: ignore[arg-type]
        timestamp = message.get("timestamp")
        if not message.keys() <= MESSAGE_FIELDS:
            check_message(message)
        return (
            topic,
            payload,
            key,
            partition,
            0 if timestamp is None else encode_timestamp(timestamp),
            headers,
            message.get("label"),
        )

    def _full_arguments(
        self, fields: tuple[Any, ...], shared: Any, batch: BatchDeliveryHandle
    ) -> tuple[tuple[Any, ...], Hooked | None]:
        """librdkafka's produce arguments for a burst's message off the common shapes (a
        partition, a timestamp, headers or a label), its send hooks applied."""
        topic, payload, key, partition, timestamp, headers, label = fields
        callback = shared if label is None else batch.labeled(label)
        hooked = None
        if self.send_hooks:
            headers, hooked = self._hook(topic, key, partition, headers, callback)
            if hooked is not None:
                callback = hooked
        return (topic, payload, key, partition, callback, None, timestamp, headers), hooked

    def _new_handle(self, client: ProducerClient, label: Any) -> DeliveryHandle:
        acknowledged = ev.MESSAGE_ACKNOWLEDGED in self.monitor.subscribed
        handle = (client.acknowledged_handle if acknowledged else client.plain_handle)()
        handle._fields = None
        handle._label = label  # always set: reading an unset slot raises (measurably slow)
        return handle

    def _dispatch(
        self,
        client: ProducerClient,
        topic: str,
        payload: Any,
        key: Any,
        partition: int,
        callback: Callable[[Any, Any], None],
        timestamp: int,
        headers: Any,
    ) -> None:
        try:
            # Positional on purpose: keyword arguments cost confluent-kafka a dict per call.
            client.produce(topic, payload, key, partition, callback, None, timestamp, headers)
        except BufferError:
            self._produce_when_room(
                client, (topic, payload, key, partition, callback, None, timestamp, headers)
            )
        except Exception as exc:
            raise client.refused(exc, topic) from exc

    def _produce_when_room(self, client: ProducerClient, arguments: tuple[Any, ...]) -> None:
        """librdkafka's queue is full: wait for delivery reports to make room, then retry."""
        deadline = time.monotonic() + self.queue_full_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.state is not OPEN:
                if self.state is not OPEN:
                    self.raise_unusable()
                raise QueueFullError(
                    f"librdkafka's local queue stayed full for {self.queue_full_timeout} s "
                    f"({len(client):,} messages waiting): the broker is slower than the "
                    "producer, or unreachable. Raise queue.buffering.max.messages / "
                    "queue.buffering.max.kbytes or queue_full_timeout, or produce less at once."
                )
            with self._room:
                self._room_waiters += 1
                try:
                    self._room.wait(min(_ROOM_RECHECK, remaining))
                finally:
                    self._room_waiters -= 1
            try:
                client.produce(*arguments)
                return
            except BufferError:
                continue
