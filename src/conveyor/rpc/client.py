"""The client side of RPC: send a command, wait for the reply with the same correlation id."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from conveyor.admin import Admin
from conveyor.app import App
from conveyor.errors import ConfigurationError, RemoteError, RpcClientClosedError, RpcTimeoutError
from conveyor.instrumentation import Monitor
from conveyor.instrumentation import events as ev
from conveyor.iterator import Iterator
from conveyor.messages import Message
from conveyor.producer import Producer
from conveyor.rpc.handlers import JSON, Codec
from conveyor.tracing import Tracing

__all__ = ["Client"]

_log = logging.getLogger("conveyor.rpc")


class Client:
    """Calls remote handlers over Kafka.

    One listener thread reads the results topic from its end, with no consumer group, and
    completes each pending call's Future (the caller wakes at once; no polling). A call that
    times out leaves the registry; its late reply is discarded and counted. With
    ``reply_partition`` the client reads (and asks for replies on) one partition only, so
    many clients need not all read every reply. ``headers`` go with every request (for the
    server's ``authorize``). With ``retries``, :meth:`call` sends a request again with the
    same id when an attempt hears nothing (each attempt waits its share of ``timeout``); the
    server answers a repeated id from its reply cache, so the handler runs once.

    Example::

        client = Client(app, commands_topic="commands", results_topic="commands_results")
        print(client.call("add", 1, 2, timeout=2.0))
    """

    def __init__(
        self,
        app_or_kafka: App | Mapping[str, Any],
        *,
        commands_topic: str,
        results_topic: str,
        reply_partition: int | None = None,
        codec: Codec = JSON,
        headers: Mapping[str, str | bytes] | None = None,
        retries: int = 0,
        monitor: Monitor | None = None,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(
                f"retries must be a whole number >= 0, got {retries!r}", "retries"
            )
        self._tracing: Tracing | None = None
        if isinstance(app_or_kafka, App):
            kafka = dict(app_or_kafka.settings.kafka)
            self._producer = app_or_kafka.producer
            self._owns_producer = False
            self._tracing = app_or_kafka.tracing
            self.monitor = monitor or app_or_kafka.monitor
        else:
            kafka = dict(app_or_kafka)
            self._producer = Producer(kafka)
            self._owns_producer = True
            self.monitor = monitor or Monitor()
        self.headers = list((headers or {}).items())
        self.retries = retries
        self.codec = codec
        self.commands_topic = commands_topic
        self.results_topic = results_topic
        self.reply_partition = reply_partition
        self.discarded = 0
        """Replies that came after their call had timed out (or were not ours)."""
        self._pending: dict[str, concurrent.futures.Future[Any]] = {}
        self._names: dict[str, tuple[str, float]] = {}  # call id -> (command, sent at)
        # call id -> (its span, when to give up on it), while tracing
        self._spans: dict[str, tuple[Any, float]] = {}
        self._lock = threading.Lock()
        self._closed = False
        partitions = (
            [reply_partition] if reply_partition is not None else _partitions(kafka, results_topic)
        )
        topics: dict[str, Any] = {results_topic: dict.fromkeys(partitions, "latest")}
        self._results = Iterator(topics, kafka, yield_nil=True, max_wait_time=0.2)
        self._thread = threading.Thread(
            target=self._listen, name="conveyor-rpc-results", daemon=True
        )
        self._thread.start()

    def call_async(
        self, name: str, *args: Any, timeout: float = 5.0, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        """Send the call and return a Future of its result (or of RemoteError); sent once
        (``retries`` are :meth:`call`'s)."""
        return self._start(name, args, kwargs, timeout)[2]

    def _start(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float
    ) -> tuple[str, bytes, concurrent.futures.Future[Any]]:
        """Register and send a call: its id, its encoded request (for retries), its Future."""
        if self._closed:
            raise RpcClientClosedError("the RPC client is closed")
        call_id = uuid.uuid4().hex
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._pending[call_id] = future
            self._names[call_id] = (name, time.perf_counter())
        request = {
            "id": call_id, "name": name, "args": list(args), "kwargs": kwargs,
            "reply_to": self.results_topic, "reply_partition": self.reply_partition,
            "deadline": int((time.time() + timeout) * 1000),
        }  # fmt: skip
        payload = self.codec.encode(request)
        tracing = self._tracing
        token = None
        if tracing is not None and tracing.enabled:  # one trace: this call, the handler, the reply
            span, token = tracing.start_call(name, self.commands_topic)
            with self._lock:
                self._spans[call_id] = (span, time.monotonic() + timeout)
        try:
            self._send(call_id, name, payload, 1)
        except BaseException as exc:
            with self._lock:
                self._pending.pop(call_id, None)
                self._names.pop(call_id, None)
            self._end_span(call_id, None, exc)
            raise
        finally:
            if token is not None:
                assert tracing is not None
                tracing.detach(token)
        return call_id, payload, future

    def call(self, name: str, *args: Any, timeout: float = 5.0, **kwargs: Any) -> Any:
        """Call ``name`` remotely and return its result.

        Raises:
            RemoteError: the handler raised (or there is no such command).
            RpcTimeoutError: no reply within ``timeout`` seconds.
            RpcClientClosedError: the client was closed meanwhile.
        """
        call_id, payload, future = self._start(name, args, kwargs, timeout)
        attempts = self.retries + 1
        share = timeout / attempts
        deadline = time.monotonic() + timeout
        for attempt in range(1, attempts + 1):
            wait = share if attempt < attempts else max(0.0, deadline - time.monotonic())
            try:
                return future.result(wait)
            except concurrent.futures.TimeoutError:
                if attempt < attempts:  # the same id: a server that ran it answers from cache
                    self._send(call_id, name, payload, attempt + 1)
        with self._lock:
            self._pending.pop(call_id, None)
            self._names.pop(call_id, None)
        if ev.RPC_CALL_TIMED_OUT in self.monitor.subscribed:
            self.monitor.instrument(
                ev.RPC_CALL_TIMED_OUT, id=call_id, command=name, attempts=attempts
            )
        error = RpcTimeoutError(
            f"no reply to {name!r} within {timeout:.3f} s"
            + (f" ({attempts} attempts)" if attempts > 1 else "")
        )
        self._end_span(call_id, None, error)
        raise error from None

    def _send(self, call_id: str, name: str, payload: bytes, attempt: int) -> None:
        self._producer.produce_async(
            topic=self.commands_topic, payload=payload, key=call_id, headers=self.headers or None
        )
        if ev.RPC_CALL_SENT in self.monitor.subscribed:
            self.monitor.instrument(ev.RPC_CALL_SENT, id=call_id, command=name, attempt=attempt)

    def pending(self) -> int:
        """Calls waiting for their reply."""
        with self._lock:
            return len(self._pending)

    def _listen(self) -> None:
        next_expiry_check = 0.0
        for message in self._results:
            if self._spans and time.monotonic() >= next_expiry_check:
                next_expiry_check = time.monotonic() + 0.5
                self._end_expired_spans()
            if message is None:
                continue
            try:
                reply = self.codec.decode(message.raw_payload or b"")
                call_id = str(reply["id"])
            except (ValueError, KeyError, TypeError):
                continue
            with self._lock:
                future = self._pending.pop(call_id, None)
                named = self._names.pop(call_id, None)
            if future is None:
                self.discarded += 1
                if ev.RPC_REPLY_DISCARDED in self.monitor.subscribed:
                    self.monitor.instrument(ev.RPC_REPLY_DISCARDED, id=call_id)
                continue
            if named is not None and ev.RPC_CALL_REPLIED in self.monitor.subscribed:
                self.monitor.instrument(
                    ev.RPC_CALL_REPLIED, id=call_id, command=named[0], ok="error" not in reply,
                    duration=time.perf_counter() - named[1],
                )  # fmt: skip
            if "error" in reply:
                error = reply["error"] or {}
                failure = RemoteError(str(error.get("type")), str(error.get("message")))
                self._end_span(call_id, message, failure)
                future.set_exception(failure)
            else:
                self._end_span(call_id, message, None)
                future.set_result(reply.get("ok"))

    def _end_span(
        self, call_id: str | None, reply: Message | None, error: BaseException | None
    ) -> None:
        if not self._spans:
            return
        with self._lock:
            entry = self._spans.pop(call_id, None) if call_id is not None else None
        if entry is None or self._tracing is None:
            return
        try:  # tracing never stops the thread that completes the calls
            self._tracing.end_call(entry[0], None if reply is None else reply._raw, error)
        except Exception:
            _log.exception("could not end the span of RPC call %s", call_id)

    def _end_expired_spans(self) -> None:
        """A call made with call_async whose reply never came ends its span at its timeout."""
        now = time.monotonic()
        with self._lock:
            expired = [call_id for call_id, (_span, until) in self._spans.items() if until < now]
        for call_id in expired:
            self._end_span(call_id, None, RpcTimeoutError(f"no reply to call {call_id}"))

    def close(self) -> None:
        """Stop listening; calls still waiting fail with RpcClientClosedError."""
        self._closed = True
        self._results.stop()
        self._thread.join(5)
        self._results.close()
        with self._lock:
            pending, self._pending = self._pending, {}
        for call_id, future in pending.items():
            error = RpcClientClosedError("the RPC client was closed before the reply came")
            self._end_span(call_id, None, error)
            future.set_exception(error)
        if self._owns_producer:
            self._producer.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _partitions(kafka: Mapping[str, Any], topic: str) -> list[int]:
    with Admin(kafka) as admin:
        return [p.partition for p in admin.topic_info(topic).partitions]
