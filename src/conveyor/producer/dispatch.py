"""The produce_* paths (``produce_sync``, ``produce_async``, bursts): check the message, hand
it to librdkafka, return the handle the poller completes. Shared by the producer and its
variants; the hot path of every produce, so it reaches librdkafka's own bound method with
positional arguments and allocates nothing for the common shapes of a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.driver import (
    BatchDeliveryHandle,
    DeliveryHandle,
    DeliveryReport,
)
from conveyor.driver.producers import ProducerClient
from conveyor.errors import (
    InvalidMessageError,
    QueueFullError,
    WaitTimeoutError,
)
from conveyor.instrumentation import events as ev
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
from conveyor.producer.send_hooks import Hooked

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from conveyor.driver.handles import DeliveryHandle
    from conveyor.errors import DeliveryError
    from conveyor.instrumentation.monitor import Monitor
    from conveyor.producer.partitioners import Partitioner
    from conveyor.producer.send_hooks import SendHook
    from conveyor.producer.settings import Middleware
    from conveyor.producer.transactions import Transactions
    from conveyor.serialization import Serializer

__all__ = ["CLOSED", "FORKED", "OPEN", "Core", "Dispatcher"]

OPEN, CLOSED, FORKED = "open", "closed", "forked"
_ACKNOWLEDGED = ev.MESSAGE_ACKNOWLEDGED
_PRODUCED_ASYNC = ev.MESSAGE_PRODUCED_ASYNC
# A producing thread serves the delivery reports already queued every this many messages,
# while it holds the GIL anyway. Left to the poller thread alone, librdkafka wakes it for
# each small batch of reports and every wake-up is a hand-off of the GIL between threads:
# measured as ~1.5x the CPU per message of a bare loop (which calls poll(0) as it goes), and
# produce_many_async at 0.8x of it instead of 0.92x.
_SERVE_EVERY = 128


class Core(Protocol):
    """What the produce paths use of the producer they send for (its state, checks, hooks and
    observers): :class:`~conveyor.producer.Producer` is the one core."""

    id: str
    monitor: Monitor
    middleware: list[Middleware]
    transactions: Transactions
    _state: str
    _max_bytes: int
    _serializer: Serializer
    _partitioner: Partitioner
    _send_hooks: tuple[SendHook, ...]
    _transactional: bool
    _unserved: int
    _default_wait: float

    def transaction(self) -> AbstractContextManager[Transactions]: ...

    def _raise_unusable(self) -> None: ...

    def _wait_timeout(self, timeout: float | None) -> float: ...

    def _apply_middleware(self, message: Mapping[str, Any]) -> dict[str, Any]: ...

    def _full_arguments(
        self, fields: tuple[Any, ...], shared: Any, batch: BatchDeliveryHandle
    ) -> tuple[tuple[Any, ...], Hooked | None]: ...

    def _hook(
        self,
        topic: str,
        key: Any,
        partition: int,
        headers: list[tuple[str, Any]] | None,
        callback: Callable[[Any, Any], None],
    ) -> tuple[list[tuple[str, Any]] | None, Hooked | None]: ...

    def _produce_when_room(self, client: ProducerClient, arguments: tuple[Any, ...]) -> None: ...

    def _new_handle(self, client: ProducerClient, label: Any) -> DeliveryHandle: ...

    def _explain(self, failure: DeliveryError) -> DeliveryError: ...

    def _observer(
        self, topic: str, partition: int, offset: int, failure: DeliveryError | None, label: Any
    ) -> None: ...


class Dispatcher:
    """The produce_* methods, shared by :class:`~conveyor.producer.Producer` and its
    :class:`~conveyor.producer.Variant` views (not a public class: use a Producer)."""

    _core: Core
    _client: ProducerClient

    def _active_client(self) -> ProducerClient:
        raise NotImplementedError

    # -- public API ---------------------------------------------------------------------------

    def produce_async(
        self,
        *,
        topic: str,
        payload: Any = None,
        key: str | bytes | None = None,
        headers: Any = None,
        partition: int | None = None,
        partition_key: str | bytes | None = None,
        timestamp: Any = None,
        label: Any = None,
    ) -> DeliveryHandle:
        """Hand one message to librdkafka and return its :class:`DeliveryHandle` at once.

        ``payload`` is bytes, str (sent as UTF-8), ``None`` (a tombstone) or anything the
        serializer takes (JSON for dicts and lists by default). ``headers`` is a dict or a
        list of ``(name, value)`` pairs (repeated names allowed), values str or bytes.
        ``partition`` picks a partition; ``partition_key`` picks the one a message keyed with
        it would land in, without sending it as the key. ``timestamp`` is milliseconds since
        the epoch or an aware ``datetime``. ``label`` travels to the delivery report and the
        monitor events.

        Raises:
            InvalidMessageError: the message is malformed (raised here, before dispatch).
            QueueFullError: librdkafka's queue stayed full for ``queue_full_timeout``.
            DeliveryError: librdkafka refused the message at once (e.g. an unknown partition).
            ProducerClosedError, ProducerForkedError: the producer cannot be used.
        """
        handle, client = self._send(
            topic, payload, key, headers, partition, partition_key, timestamp, label
        )
        client.handed_over()  # a parked poller is woken, unless the running loop serves
        return handle

    def _produce_unhurried(self, message: Mapping[str, Any]) -> DeliveryHandle:
        """:meth:`produce_async` of ``message`` (its keyword arguments as a dict), whose
        delivery report nobody waits for at once (a copy behind a held offset, an RPC
        request): a parked poller is left parked, so the report is served within its idle
        slice (0.1 s), or at once by a thread that waits on the handle. Waking it cost an RPC
        round trip ~30 us on 2 cores (its wake-up and callbacks compete with the broker and
        the other side for the CPU)."""
        if not message.keys() <= MESSAGE_FIELDS:
            check_message(dict(message))  # names the unknown field
        get = message.get
        topic: str = get("topic")  # type: ignore[assignment]  # _send checks it
        handle, _client = self._send(
            topic, get("payload"), get("key"), get("headers"), get("partition"),
            get("partition_key"), get("timestamp"), get("label"),
        )  # fmt: skip
        return handle

    def produce_sync(
        self,
        *,
        topic: str,
        payload: Any = None,
        key: str | bytes | None = None,
        headers: Any = None,
        partition: int | None = None,
        partition_key: str | bytes | None = None,
        timestamp: Any = None,
        label: Any = None,
        timeout: float | None = None,
    ) -> DeliveryReport:
        """Produce one message and return its :class:`DeliveryReport` once the broker acknowledged it.

        Takes the arguments of :meth:`produce_async`, plus ``timeout``: seconds to wait for
        the acknowledgement (default: the producer's ``wait_timeout``, else until librdkafka
        reports, which ``message.timeout.ms`` bounds).

        Raises:
            DeliveryError: the message was not delivered (librdkafka's code and name kept).
            WaitTimeoutError: no report within ``timeout`` (the message may still be delivered).
            InvalidMessageError: the message was refused before librdkafka (the field named).
            QueueFullError: librdkafka's queue stayed full for ``queue_full_timeout``.
            ProducerClosedError: the producer was closed.
            ProducerForkedError: the producer was made before this process was forked.
        """
        core = self._core
        started = time.perf_counter()
        # The poller is not woken: if it is parked, this thread serves its own report (lead).
        handle, client = self._send(
            topic, payload, key, headers, partition, partition_key, timestamp, label
        )
        wait = core._default_wait if timeout is None else timeout
        deadline = time.monotonic() + wait  # the caller's: leading and following share it
        if client.lead(handle.done, deadline) and handle.done():
            report = handle.result()
        else:  # a follower: the poller (or another waiter leading) serves the report
            try:
                report = handle.wait(max(0.0, deadline - time.monotonic()))
            except WaitTimeoutError:
                raise WaitTimeoutError(
                    f"no delivery report within {wait:.3f} s; the message may still be "
                    "delivered (possibly persisted)"
                ) from None
        if ev.MESSAGE_PRODUCED_SYNC in core.monitor.subscribed:
            core.monitor.instrument(
                ev.MESSAGE_PRODUCED_SYNC, producer_id=core.id, report=report, label=label,
                duration=time.perf_counter() - started,
            )  # fmt: skip
        return report

    def produce_many_async(
        self, messages: Iterable[Mapping[str, Any]], *, reports: bool = False
    ) -> BatchDeliveryHandle:
        """Check every message, then hand them all to librdkafka as one burst.

        ``messages`` are dicts with the keyword arguments of :meth:`produce_async`. Nothing
        is sent unless every message is valid. Returns one :class:`BatchDeliveryHandle` for
        the burst; its ``wait()`` gives the reports of the labeled messages (of all messages
        with ``reports=True``, at some cost in throughput) in the order they were acknowledged.

        Raises:
            InvalidMessageError: a message is malformed (none was sent).
            QueueFullError: the queue stayed full; ``error.handle`` covers the messages sent before.
        """
        core = self._core
        if core._state is not OPEN:
            core._raise_unusable()
        if core.transactions.needs_implicit():
            with core.transaction():
                return self.produce_many_async(messages, reports=reports)
        started = time.perf_counter()
        client = self._active_client()
        if type(messages) is not list:
            messages = list(messages)
        # One checking pass that allocates nothing for the common shapes ({"topic", "payload"
        # [, "key"]}); only messages off those shapes are prepared in full (``special``).
        special = self._check_many(messages, client)
        count = len(messages)
        batch = BatchDeliveryHandle(
            count,
            core._observer,
            every=ev.MESSAGE_ACKNOWLEDGED in core.monitor.subscribed,
            keep_reports=reports,
            explain=core._explain,
            lead=client.lead,
            clarify=client.plain_handle._clarify,  # the client's, as its handles have it
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
                        core._produce_when_room(client, (topic, payload, key, -1, shared))
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
                        arguments, hooked = core._full_arguments(fields, shared, batch)
                    try:
                        try:
                            produce(*arguments)
                        except BufferError:
                            core._produce_when_room(client, arguments)
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
        if ev.MESSAGES_PRODUCED_ASYNC in core.monitor.subscribed:
            core.monitor.instrument(
                ev.MESSAGES_PRODUCED_ASYNC, producer_id=core.id, count=count,
                duration=time.perf_counter() - started,
            )  # fmt: skip
        return batch

    def produce_many_sync(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        timeout: float | None = None,
        reports: bool = False,
    ) -> list[DeliveryReport]:
        """:meth:`produce_many_async`, then wait for every acknowledgement; returns the reports of
        the labeled messages (of every message with ``reports=True``).

        Raises:
            BatchDeliveryError: some messages were not delivered (``failures`` lists them).
            WaitTimeoutError: not every report came within ``timeout``.
            InvalidMessageError: a message was refused before librdkafka (nothing was sent).
            QueueFullError: librdkafka's queue stayed full for ``queue_full_timeout``.
        """
        core = self._core
        started = time.perf_counter()
        batch = self.produce_many_async(messages, reports=reports)
        delivered = batch.wait(core._wait_timeout(timeout))
        if ev.MESSAGES_PRODUCED_SYNC in core.monitor.subscribed:
            core.monitor.instrument(
                ev.MESSAGES_PRODUCED_SYNC, producer_id=core.id, count=batch.count,
                duration=time.perf_counter() - started,
            )  # fmt: skip
        return delivered

    def _send(
        self,
        topic: str,
        payload: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        partition_key: Any,
        timestamp: Any,
        label: Any,
    ) -> tuple[DeliveryHandle, ProducerClient]:
        """Check one message and hand it to librdkafka: its handle and the client it went to
        (positional: this is the hot path of every produce)."""
        core = self._core
        if core._state is not OPEN:
            core._raise_unusable()
        if core.middleware or core._transactional or partition_key is not None:
            message = {
                "topic": topic, "payload": payload, "key": key, "headers": headers,
                "partition": partition, "partition_key": partition_key,
                "timestamp": timestamp, "label": label,
            }  # fmt: skip
            return self._produce_message(message)
        # The hot path, inlined: a bytes payload and nothing else set costs a few checks.
        if type(topic) is not str or not topic:
            topic = check_topic(topic)
        if type(payload) is not bytes or len(payload) > core._max_bytes:
            payload = encode_payload(payload, core._serializer, core._max_bytes)
        if key is not None and type(key) is not bytes and type(key) is not str:
            key = encode_key(key)
        if headers is not None:
            headers = encode_headers(headers)
        client = self._client
        if client.fatal is not None:
            client = self._active_client()
        subscribed = core.monitor.subscribed
        handle = (
            client.acknowledged_handle if _ACKNOWLEDGED in subscribed else client.plain_handle
        )()
        handle._fields = None
        handle._label = label  # always set: reading an unset slot raises (measurably slow)
        partition = -1 if partition is None else encode_partition(partition)
        if timestamp is not None:
            timestamp = encode_timestamp(timestamp)
        if core._send_hooks:  # tracing, latency stamps: here, not on the general path (~5 us)
            self._send_hooked(client, topic, payload, key, partition, handle, timestamp, headers)
        else:
            try:
                # Positional on purpose: keyword arguments cost confluent-kafka a dict per call.
                client.produce(
                    topic, payload, key, partition, handle, None, timestamp or 0, headers
                )
            except BufferError:
                core._produce_when_room(
                    client, (topic, payload, key, partition, handle, None, timestamp or 0, headers)
                )
            except Exception as exc:
                raise client.refused(exc, topic) from exc
        core._unserved += 1
        if core._unserved >= _SERVE_EVERY:  # see produce_many_async (a heuristic count)
            core._unserved = 0
            client.serve(0)
        if _PRODUCED_ASYNC in subscribed:
            core.monitor.instrument(
                _PRODUCED_ASYNC, producer_id=core.id, topic=topic, key=key, label=label
            )
        return handle, client

    # -- internals ----------------------------------------------------------------------------

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
        headers, hooked = self._core._hook(topic, key, partition, headers, handle)
        try:
            self._dispatch(
                client, topic, payload, key, partition, hooked or handle, timestamp or 0, headers
            )
        except Exception as exc:
            if hooked is not None:
                hooked.fail(exc)
            raise

    def _produce_message(self, message: dict[str, Any]) -> tuple[DeliveryHandle, ProducerClient]:
        """The general path: middleware, partition_key, implicit transactions."""
        core = self._core
        if core.transactions.needs_implicit():
            with core.transaction():
                return self._produce_message(message)
        client = self._active_client()
        topic, payload, key, partition, timestamp, headers, label = self._prepare(message, client)
        handle = core._new_handle(client, label)
        if core._send_hooks:
            self._send_hooked(client, topic, payload, key, partition, handle, timestamp, headers)
        else:
            self._dispatch(client, topic, payload, key, partition, handle, timestamp, headers)
        # As on the hot path: without it the poller thread woke for every delivery report,
        # and those GIL hand-offs cost a traced (or any hooked) message ~0.2 ms of e2e p50.
        core._unserved += 1
        if core._unserved >= _SERVE_EVERY:
            core._unserved = 0
            client.serve(0)
        if ev.MESSAGE_PRODUCED_ASYNC in core.monitor.subscribed:
            core.monitor.instrument(
                ev.MESSAGE_PRODUCED_ASYNC, producer_id=core.id, topic=topic, key=key, label=label
            )
        return handle, client

    def _check_many(
        self, messages: list[Mapping[str, Any]], client: ProducerClient
    ) -> dict[int, tuple[Any, ...]] | None:
        """Check every message of a burst (raising before anything is sent). Returns the full
        preparation of the messages that are not of a common shape, by index, or ``None``
        when all are ``{"topic": str, "payload": bytes[, "key": str | bytes | None]}`` dicts
        (checked here without allocating anything per message)."""
        core = self._core
        if core.middleware or core._send_hooks:
            return {index: self._prepare(message, client) for index, message in enumerate(messages)}
        special: dict[int, tuple[Any, ...]] | None = None
        max_bytes = core._max_bytes
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
        core = self._core
        if core.middleware:
            message = core._apply_middleware(message)
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
        if type(payload) is not bytes or len(payload) > core._max_bytes:
            payload = encode_payload(payload, core._serializer, core._max_bytes)
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
            partition = core._partitioner(raw_bytes, client.partition_count(topic))  # type: ignore[arg-type]
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
            self._core._produce_when_room(
                client, (topic, payload, key, partition, callback, None, timestamp, headers)
            )
        except Exception as exc:
            raise client.refused(exc, topic) from exc
