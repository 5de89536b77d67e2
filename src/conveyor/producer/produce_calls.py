"""The produce calls (``produce_async``, ``produce_sync``, bursts) of a producer and of its
variants: their public signatures, each sending through the producer's
:class:`~conveyor.producer.send_path.SendPath` on the caller's own client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.errors import WaitTimeoutError
from conveyor.instrumentation import events as ev
from conveyor.producer.messages import MESSAGE_FIELDS, check_message

if TYPE_CHECKING:
    from conveyor.driver import BatchDeliveryHandle, DeliveryHandle, DeliveryReport
    from conveyor.driver.producers import ProducerClient
    from conveyor.producer.send_path import SendPath

__all__ = ["ProduceCalls"]


class ProduceCalls:
    """The produce_* calls of :class:`~conveyor.producer.Producer` and its
    :class:`~conveyor.producer.Variant` views (not a public class: use a Producer). Each one
    sends through the send path the two share, on this object's client."""

    _send_path: SendPath
    _client: ProducerClient

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
        handle, client = self._send_path.send(
            self._client, topic, payload, key, headers, partition, partition_key, timestamp, label
        )
        client.handed_over()  # a parked poller is woken, unless the running loop serves
        return handle

    def produce_unhurried(self, message: Mapping[str, Any]) -> DeliveryHandle:
        """:meth:`produce_async` of ``message`` (its keyword arguments as a dict, as
        :meth:`produce_many_async` takes them), for a message whose delivery report nobody
        waits for at once (a copy behind a held offset, an RPC request).

        A producer's poller parked for lack of work is left parked: the report is served
        within its idle slice (0.1 s), or at once by a thread that waits on the handle.
        Waking it cost an RPC round trip ~30 us on 2 cores (its wake-up and callbacks compete
        with the broker and the other side for the CPU).

        Raises:
            InvalidMessageError: the message is malformed (raised here, before dispatch).
            QueueFullError: librdkafka's queue stayed full for ``queue_full_timeout``.
            DeliveryError: librdkafka refused the message at once (e.g. an unknown partition).
            ProducerClosedError, ProducerForkedError: the producer cannot be used.
        """
        if not message.keys() <= MESSAGE_FIELDS:
            check_message(dict(message))  # names the unknown field
        get = message.get
        topic: str = get("topic")  # type: ignore[assignment]  # send checks it
        handle, _client = self._send_path.send(
            self._client,
            topic,
            get("payload"),
            get("key"),
            get("headers"),
            get("partition"),
            get("partition_key"),
            get("timestamp"),
            get("label"),
        )
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
        path = self._send_path
        started = time.perf_counter()
        # The poller is not woken: if it is parked, this thread serves its own report (lead).
        handle, client = path.send(
            self._client, topic, payload, key, headers, partition, partition_key, timestamp, label
        )
        wait = path.default_wait if timeout is None else timeout
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
        if ev.MESSAGE_PRODUCED_SYNC in path.monitor.subscribed:
            path.monitor.instrument(
                ev.MESSAGE_PRODUCED_SYNC,
                producer_id=path.producer_id,
                report=report,
                label=label,
                duration=time.perf_counter() - started,
            )
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
        return self._send_path.send_many(self._client, messages, reports)

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
        path = self._send_path
        started = time.perf_counter()
        batch = path.send_many(self._client, messages, reports)
        delivered = batch.wait(path.wait_timeout(timeout))
        if ev.MESSAGES_PRODUCED_SYNC in path.monitor.subscribed:
            path.monitor.instrument(
                ev.MESSAGES_PRODUCED_SYNC,
                producer_id=path.producer_id,
                count=batch.count,
                duration=time.perf_counter() - started,
            )
        return delivered
