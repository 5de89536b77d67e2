"""The client side of RPC: send a command, wait for the reply with the same correlation id."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.admin import Admin
from conveyor.errors import (
    ConfigurationError,
    MessageValidationError,
    RemoteError,
    RpcClientClosedError,
    RpcTimeoutError,
)
from conveyor.instrumentation import Monitor
from conveyor.instrumentation import events as ev
from conveyor.iterator import Iterator
from conveyor.messages import Message, record_of
from conveyor.models import converter, field_errors
from conveyor.models.codecs import model_name
from conveyor.producer import Producer
from conveyor.rpc.handlers import JSON, Codec
from conveyor.tracing import Tracing

if TYPE_CHECKING:
    from conveyor.host import Host

__all__ = ["Client"]

_log = logging.getLogger("conveyor.rpc")

_READ_SLICE = 0.1
"""The longest one read of the results waits (a reply ends it at once): how soon a reader
notices that its call timed out or that the client closes."""
_EXPIRY_CHECK = 0.5
"""How often the timed-out calls' spans are ended, while tracing."""


class _Call:
    """One call waiting for its reply: its command, when it was sent, and how it ended (the
    Future of :meth:`Client.call_async` is ended too)."""

    __slots__ = ("done", "error", "future", "name", "returns", "sent_at", "value")

    def __init__(
        self, name: str, future: concurrent.futures.Future[Any] | None, returns: Any = None
    ) -> None:
        self.name = name
        self.future = future
        self.returns = returns  # the result's model (validated on arrival), or None
        self.sent_at = time.perf_counter()
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def finish(self, value: Any, error: BaseException | None) -> None:
        """The reply came (or the call can wait no more): by the thread that read it."""
        self.value, self.error = value, error
        self.done = True
        future = self.future
        if future is not None and not future.done():  # (the caller may have cancelled it)
            try:
                if error is None:
                    future.set_result(value)
                else:
                    future.set_exception(error)
            except concurrent.futures.InvalidStateError:  # cancelled just now
                pass

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class Client:
    """Calls remote handlers over Kafka.

    The results topic is read from its end, with no consumer group, by one thread at a time:
    a thread waiting in :meth:`call` reads it itself (the reply needs no hand-over to reach
    it) and ends the other pending calls on the way; other threads waiting meanwhile
    are woken by their reply or take over the reading when the reader's own reply came. A
    background thread reads only for calls nobody waits in :meth:`call` for
    (:meth:`call_async`). A call that times out leaves the registry; its late reply is
    discarded and counted. With
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
        app_or_kafka: Host | Mapping[str, Any],
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
        if isinstance(app_or_kafka, Mapping):
            kafka = dict(app_or_kafka)
            self._producer = Producer(kafka)
            self._owns_producer = True
            self.monitor = monitor or Monitor()
        else:
            kafka = dict(app_or_kafka.settings.kafka)
            self._producer = app_or_kafka.producer
            self._owns_producer = False
            self._tracing = app_or_kafka.tracing
            self.monitor = monitor or app_or_kafka.monitor
        self.headers = list((headers or {}).items())
        self.retries = retries
        self.codec = codec
        self.commands_topic = commands_topic
        self.results_topic = results_topic
        self.reply_partition = reply_partition
        self.discarded = 0
        """Replies that came after their call had timed out (or were not ours)."""
        # One lock for the registry and for who reads: _pending holds the calls waiting for
        # a reply; _reading is set while one thread reads the results; _callers counts the
        # threads waiting in call(), _followers those of them waiting for the reader's news
        # (on _turn); the background reader waits on _unattended_calls.
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self._unattended_calls = threading.Condition(self._lock)
        self._pending: dict[str, _Call] = {}
        # call id -> (its span, when to give up on it), while tracing
        self._spans: dict[str, tuple[Any, float]] = {}
        self._closed = False
        self._reading = False
        self._callers = 0
        self._followers = 0
        partitions = (
            [reply_partition] if reply_partition is not None else _partitions(kafka, results_topic)
        )
        topics: dict[str, Any] = {results_topic: dict.fromkeys(partitions, "latest")}
        self._results = Iterator(topics, kafka)
        self._thread = threading.Thread(
            target=self._listen, name="conveyor-rpc-results", daemon=True
        )
        self._thread.start()

    def call(
        self, name: str, *args: Any, timeout: float = 5.0, returns: Any = None, **kwargs: Any
    ) -> Any:
        """Call ``name`` remotely and return its result. Arguments may be model instances
        (pydantic, msgspec, dataclass: sent as JSON); ``returns``, a model, validates the
        result into an instance of it.

        Raises:
            RemoteError: the handler raised (or there is no such command).
            RpcTimeoutError: no reply within ``timeout`` seconds.
            RpcClientClosedError: the client was closed meanwhile.
            MessageValidationError: the result does not fit ``returns`` (``part="result"``).
        """
        call = _Call(name, None, _converter(returns))
        call_id, payload = self._start(call, args, kwargs, timeout)
        attempts = self.retries + 1
        try:
            share = timeout / attempts
            started = time.monotonic()
            for attempt in range(1, attempts + 1):
                until = started + (share * attempt if attempt < attempts else timeout)
                if self._await(call, until):
                    return call.result()
                if attempt < attempts:  # the same id: a server that ran it answers from cache
                    self._send(call_id, name, payload, attempt + 1)
        finally:
            with self._lock:
                self._callers -= 1
                left = self._pending.pop(call_id, None)
                if not self._reading and len(self._pending) > self._callers:
                    self._unattended_calls.notify()  # call_async calls only this thread ended
        if left is None and call.done:  # the reply came just as the wait ended
            return call.result()
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

    def call_async(
        self, name: str, *args: Any, timeout: float = 5.0, returns: Any = None, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        """Send the call and return a Future of its result (or of RemoteError); sent once
        (``retries`` are :meth:`call`'s)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._start(_Call(name, future, _converter(returns)), args, kwargs, timeout)
        with self._lock:
            if not self._reading:
                self._unattended_calls.notify()
        return future

    async def acall(
        self, name: str, *args: Any, timeout: float = 5.0, returns: Any = None, **kwargs: Any
    ) -> Any:
        """Call ``name`` from a coroutine and return its result, without blocking the event
        loop: the reply wakes the await through the loop, and many calls may be in flight on
        one loop (``asyncio.gather``). Sent once, as :meth:`call_async`; a cancelled await
        leaves the call to end by its reply or its timeout.

        Raises:
            RemoteError: the handler raised (or there is no such command).
            RpcTimeoutError: no reply within ``timeout`` seconds.
            RpcClientClosedError: the client was closed meanwhile.
        """
        future = self.call_async(name, *args, timeout=timeout, returns=returns, **kwargs)
        return await asyncio.shield(asyncio.wrap_future(future))

    def pending(self) -> int:
        """Calls waiting for their reply."""
        with self._lock:
            return len(self._pending)

    # -- sending ------------------------------------------------------------------------------

    def _start(
        self, call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float
    ) -> tuple[str, bytes]:
        """Register and send ``call`` (one of :meth:`call`'s, counted as waited for, unless it
        has a Future): its id and its encoded request (for retries)."""
        call_id = os.urandom(16).hex()
        request = {
            "id": call_id,
            "name": call.name,
            "args": list(args),
            "kwargs": kwargs,
            "reply_to": self.results_topic,
            "reply_partition": self.reply_partition,
            "deadline": int((time.time() + timeout) * 1000),
        }
        payload = self.codec.encode(request)
        waited = call.future is None
        tracing = self._tracing
        span = token = None
        if tracing is not None and tracing.enabled:  # one trace: this call, the handler, the reply
            span, token = tracing.start_call(call.name, self.commands_topic)
        with self._lock:  # close() takes the pending calls under it: none is left behind
            if self._closed:
                if token is not None:
                    assert tracing is not None
                    tracing.detach(token)
                raise RpcClientClosedError("the RPC client is closed")
            self._pending[call_id] = call
            if waited:
                self._callers += 1
            if span is not None:
                self._spans[call_id] = (span, time.monotonic() + timeout)
        try:
            self._send(call_id, call.name, payload, 1)
        except BaseException as exc:
            with self._lock:
                self._pending.pop(call_id, None)
                if waited:
                    self._callers -= 1
            self._end_span(call_id, None, exc)
            raise
        finally:
            if token is not None:
                assert tracing is not None
                tracing.detach(token)
        return call_id, payload

    def _send(self, call_id: str, name: str, payload: bytes, attempt: int) -> None:
        # Nobody waits for the request's delivery report: the reply tells.
        self._producer.produce_unhurried(
            {
                "topic": self.commands_topic,
                "payload": payload,
                "key": call_id,
                "headers": self.headers or None,
            }
        )
        if ev.RPC_CALL_SENT in self.monitor.subscribed:
            self.monitor.instrument(ev.RPC_CALL_SENT, id=call_id, command=name, attempt=attempt)

    # -- reading the replies ------------------------------------------------------------------

    def _await(self, call: _Call, until: float) -> bool:
        """Wait until ``call`` is done (True) or the monotonic ``until`` (False): reading the
        results while nobody else does, else woken by whoever does."""
        while not call.done:
            left = until - time.monotonic()
            if left <= 0:
                return False
            with self._lock:
                if self._reading or self._closed:  # closed: close() ends the call at once
                    self._followers += 1
                    try:
                        self._turn.wait_for(
                            lambda: call.done or not (self._reading or self._closed), left
                        )
                    finally:
                        self._followers -= 1
                    continue
                self._reading = True
            try:
                while not call.done:
                    left = until - time.monotonic()
                    if left <= 0 or self._closed:
                        break
                    self._read(left if left < _READ_SLICE else _READ_SLICE)
            finally:
                self._stop_reading()
        return True

    def _stop_reading(self) -> None:
        """The reader is done: a follower, else the background reader, may go on."""
        with self._lock:
            self._reading = False
            if self._followers or self._closed:  # (close() waits for the reader to leave)
                self._turn.notify_all()
            # Not only when nobody follows: the followers may all find their calls ended.
            if len(self._pending) > self._callers:
                self._unattended_calls.notify()

    def _listen(self) -> None:
        """The background reader: reads while calls are pending that nobody waits for in
        call() (call_async's) and nobody else reads; ends timed-out call_async spans."""
        next_expiry_check = 0.0

        def unattended() -> bool:
            return self._closed or (not self._reading and len(self._pending) > self._callers)

        while True:
            with self._lock:
                self._unattended_calls.wait_for(unattended, _EXPIRY_CHECK if self._spans else None)
                if self._closed:
                    return
                read = not self._reading and len(self._pending) > self._callers
                if read:
                    self._reading = True
            if read:
                try:
                    self._read(_READ_SLICE)
                except Exception:  # the reader goes on; the calls time out if it keeps failing
                    _log.exception("reading the RPC results failed")
                finally:
                    self._stop_reading()
            if self._spans and time.monotonic() >= next_expiry_check:
                next_expiry_check = time.monotonic() + _EXPIRY_CHECK
                self._end_expired_spans()

    def _read(self, timeout: float) -> None:
        """One read of the results (by the thread that reads now): each reply ends its call;
        followers are told when one of theirs may have come."""
        completed = False
        for message in self._results.poll(timeout):
            completed = self._complete(message) or completed
        if completed and self._followers:
            with self._lock:
                self._turn.notify_all()

    def _complete(self, message: Message) -> bool:
        """End the call ``message`` replies to; False when it is not a pending call's."""
        try:
            reply = self.codec.decode(message.raw_payload or b"")
            call_id = str(reply["id"])
        except (ValueError, KeyError, TypeError):
            return False
        with self._lock:
            call = self._pending.pop(call_id, None)
        if call is None:
            self.discarded += 1
            if ev.RPC_REPLY_DISCARDED in self.monitor.subscribed:
                self.monitor.instrument(ev.RPC_REPLY_DISCARDED, id=call_id)
            return False
        if ev.RPC_CALL_REPLIED in self.monitor.subscribed:
            self.monitor.instrument(
                ev.RPC_CALL_REPLIED,
                id=call_id,
                command=call.name,
                ok="error" not in reply,
                duration=time.perf_counter() - call.sent_at,
            )
        if "error" in reply:
            error = reply["error"] or {}
            remote = RemoteError(str(error.get("type")), str(error.get("message")))
            self._end_span(call_id, message, remote)
            call.finish(None, remote)
        else:
            value, failure = _result(call, reply.get("ok"), message)
            self._end_span(call_id, message, failure)
            call.finish(value, failure)
        return True

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
            self._tracing.end_call(entry[0], None if reply is None else record_of(reply), error)
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
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, {}
        for call_id, call in pending.items():
            error = RpcClientClosedError("the RPC client was closed before the reply came")
            self._end_span(call_id, None, error)
            call.finish(None, error)
        with self._lock:
            self._turn.notify_all()
            self._unattended_calls.notify_all()
        self._thread.join(5)
        with self._lock:  # a reader leaves after its current read (its call ended just now)
            self._turn.wait_for(lambda: not self._reading, _READ_SLICE + 5)
        self._results.close()
        if self._owns_producer:
            self._producer.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _partitions(kafka: Mapping[str, Any], topic: str) -> list[int]:
    with Admin(kafka) as admin:
        return [p.partition for p in admin.topic_info(topic).partitions]


def _converter(returns: Any) -> Any:
    return None if returns is None else (returns, converter(returns, "returns"))


def _result(call: _Call, value: Any, message: Message) -> tuple[Any, BaseException | None]:
    """The reply's result, validated into the call's ``returns`` model when it has one."""
    if call.returns is None:
        return value, None
    model, convert = call.returns
    try:
        return convert(value), None
    except Exception as error:
        errors = field_errors(error)
        if errors is None:
            return None, error
        reasons = "; ".join(f"{e.path}: {e.message}" for e in errors)
        return None, MessageValidationError(
            f"the result of {call.name!r} is not a valid {model_name(model)}: {reasons}",
            part="result",
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            errors=errors,
        )
