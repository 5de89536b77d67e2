"""The server side of RPC: named handlers and the consumer that answers requests."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from conveyor.consumer import Consumer
from conveyor.hook_results import run_hook
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import Message
from conveyor.models.arguments import ArgumentChecker
from conveyor.serialization import json_dumps, json_loads

__all__ = ["JSON", "Authorize", "Codec", "Handlers", "ReplyCache", "responder_for"]


class Codec(Protocol):
    """How requests and replies are encoded on the wire (JSON by default)."""

    def encode(self, value: Any) -> bytes: ...

    def decode(self, raw: bytes) -> Any: ...


class _Json:
    def encode(self, value: Any) -> bytes:
        return json_dumps(value)

    def decode(self, raw: bytes) -> Any:
        return json_loads(raw)


JSON: Codec = _Json()

_log = logging.getLogger("conveyor.rpc")
_warnings = RateLimitedLog(_log)


class Handlers:
    """A registry of RPC handlers (plain functions, sync or ``async def``).

    Example::

        handlers = Handlers()

        @handlers.register("add")
        def add(a, b):
            return a + b
    """

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._checkers: dict[str, ArgumentChecker] = {}

    def register(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register the decorated function as handler ``name``; each request's arguments are
        checked against its signature and type hints before it runs (see
        :mod:`conveyor.models.arguments`)."""

        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._handlers:
                raise ValueError(f"an RPC handler named {name!r} is already registered")
            checker = ArgumentChecker(function)  # first: a handler it refuses is not registered
            self._handlers[name] = function
            self._checkers[name] = checker
            return function

        return decorate

    def get(self, name: str) -> Callable[..., Any] | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        """The registered commands, in the order they were registered."""
        return list(self._handlers)

    def checker(self, name: str) -> ArgumentChecker | None:
        return self._checkers.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


class ReplyCache:
    """Recent replies by request id (a retried request is answered from here instead of
    running its handler again): at most ``size``, each for ``ttl`` seconds.

    Each reply is kept as a right-sized copy: orjson (3.12 and later) hands back its output
    in a buffer of at least 4 KB that it never shrinks, so 10,000 cached replies of a hundred
    bytes held ~40 MB instead of ~1 MB (the copy costs ~0.2 µs a reply)."""

    def __init__(self, ttl: float = 600.0, size: int = 10_000) -> None:
        self.ttl = ttl
        self.size = size
        self._replies: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, call_id: str) -> bytes | None:
        # One lookup, atomic under the GIL: a new id (nearly every request) takes no lock.
        entry = self._replies.get(call_id)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def put(self, call_id: str, payload: bytes) -> None:
        payload = bytes(memoryview(payload))  # right-sized (see the class)
        now = time.monotonic()
        with self._lock:
            if call_id in self._replies:
                self._replies.move_to_end(call_id)
            self._replies[call_id] = (payload, now + self.ttl)
            while self._replies and (
                len(self._replies) > self.size or next(iter(self._replies.values()))[1] < now
            ):
                self._replies.popitem(last=False)


Authorize = Callable[[dict[str, Any], dict[str, bytes]], bool]
"""``authorize(request, headers) -> bool``: the decoded request (``id``, ``name``, ``args``,
``kwargs``) and the message's headers (name -> bytes)."""


class Responder(Consumer):
    """Answers the requests of a commands topic (see :func:`responder_for`, which makes a
    subclass for each route with its handlers, codec, check and reply cache)."""

    rpc: ClassVar[_Answering]
    expired = 0
    """Requests skipped because their caller's deadline had passed."""
    malformed = 0
    """Messages on the commands topic that were not requests (dropped, logged)."""
    duplicates = 0
    """Requests answered from the reply cache (their handler had run already)."""

    def consume(self) -> None:
        answered: dict[int, _Reply | None] = self.__dict__.setdefault("_answered", {})
        app = getattr(self, "app", None)  # set by an App; tests may run it bare
        tracing = app.tracing if app is not None else None
        # A batch of one is traced as the request's child already; in a larger batch each
        # request gets its own span, so that its reply continues its caller's trace.
        messages = self.messages
        several = len(messages) > 1
        traced = several and tracing is not None and tracing.enabled
        for message in messages:
            if traced:
                assert tracing is not None
                with tracing.message_span(message):
                    self._respond(message, answered)
            else:
                self._respond(message, answered)
            if several:  # (a batch's last is marked when consume() returns)
                self.mark_as_consumed(message)

    def _observed(self, event: str) -> bool:
        app = getattr(self, "app", None)
        return app is not None and event in app.monitor.subscribed

    def _event(self, event: str, **fields: Any) -> None:
        if self._observed(event):
            self.app.monitor.instrument(event, topic=self.topic, **fields)

    def _respond(self, message: Message, answered: dict[int, _Reply | None]) -> None:
        offset = message.offset
        if offset in answered:  # a retry re-sends the reply, never re-runs
            reply = answered[offset]
        else:
            reply = answered[offset] = self._answer(message.raw_payload, message.raw_headers)
        if reply is not None:
            topic, partition, payload, key, cache_key = reply
            # Sent without waiting for the broker, so that the next request need not wait
            # either (and a quick handler runs on the listener's thread): at-least-once
            # comes from the request's offset, never committed before the reply's
            # acknowledgement, and from resending a reply that failed.
            self._send_held(
                message,
                {"topic": topic, "payload": payload, "key": key, "partition": partition},
            )
            if cache_key is not None:
                self.rpc.replies.put(cache_key, payload)
        del answered[offset]

    def _answer(self, raw: bytes | None, raw_headers: Any) -> _Reply | None:
        try:
            request = self.rpc.codec.decode(raw or b"")
            if not isinstance(request, dict):
                raise TypeError(f"a request is a mapping, not {type(request).__name__}")
            call_id = str(request["id"])
            partition = request.get("reply_partition")
            if partition is not None and (
                isinstance(partition, bool) or not isinstance(partition, int)
            ):
                raise TypeError(f"reply_partition must be an integer, not {partition!r}")
        except Exception as exc:
            type(self).malformed += 1
            self._event(ev.RPC_REQUEST_MALFORMED, error=exc)
            _warnings.warning(
                f"{self.topic}:malformed",
                "%s: dropping a message that is not an RPC request (%r)",
                self.topic,
                exc,
            )
            return None
        reply_to = str(request.get("reply_to") or self.rpc.results_topic)
        name = request.get("name", "")
        refusal = self._refused(call_id, name, request, raw_headers)
        if refusal is not None:  # checked before the cache: a cached reply is no pass
            payload = self._encode(call_id, refusal)
            return None if payload is None else (reply_to, partition, payload, call_id, None)
        cache_key = f"{name}\x00{call_id}"
        cached = self.rpc.replies.get(cache_key)
        if cached is not None:
            type(self).duplicates += 1
            self._event(ev.RPC_REQUEST_DUPLICATE, id=call_id, command=name)
            return reply_to, partition, cached, call_id, None
        deadline = request.get("deadline")
        if isinstance(deadline, int | float) and time.time() * 1000 > deadline:
            type(self).expired += 1
            self._event(ev.RPC_REQUEST_EXPIRED, id=call_id, command=name)
            return None  # the caller gave up already
        started = time.perf_counter()
        body = self._run(call_id, name, request, raw_headers)
        if self._observed(ev.RPC_REQUEST_HANDLED):
            failed = "error" in body
            self._event(
                ev.RPC_REQUEST_HANDLED,
                id=call_id,
                command=name,
                ok=not failed,
                error_type=body["error"]["type"] if failed else None,
                duration=time.perf_counter() - started,
            )
        payload = self._encode(call_id, body)
        if payload is None:
            return None
        return reply_to, partition, payload, call_id, cache_key

    def _run(
        self, call_id: str, name: Any, request: dict[str, Any], raw_headers: Any
    ) -> dict[str, Any]:
        handler = self.rpc.handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            return _error(call_id, "UnknownCommand", f"no handler named {name!r}")
        checker = self.rpc.handlers.checker(name)
        try:
            args, kwargs = request.get("args", ()), request.get("kwargs", {})
            if checker is not None:
                args, kwargs = checker.check(args, kwargs)
        except TypeError as exc:  # InvalidArguments, or a signature bind could not take
            return _error(call_id, "InvalidArguments", f"{name}: {exc}")
        try:
            return {"id": call_id, "ok": run_hook(handler(*args, **kwargs))}
        except Exception as exc:
            return _error(call_id, type(exc).__name__, str(exc))

    def _refused(
        self, call_id: str, name: Any, request: dict[str, Any], raw_headers: Any
    ) -> dict[str, Any] | None:
        """The ``Unauthorized`` reply when ``authorize`` says no (or fails), else ``None``."""
        authorize = self.rpc.authorize
        if authorize is None:
            return None
        headers = {n: v for n, v in raw_headers or () if v is not None}
        try:
            allowed = bool(authorize(request, headers))
        except Exception:  # a failing check refuses
            _log.exception("%s: authorize() failed for %s", self.topic, call_id)
            allowed = False
        if allowed:
            return None
        self._event(ev.RPC_REQUEST_REFUSED, id=call_id, command=name)
        return _error(call_id, "Unauthorized", f"not allowed to call {name!r}")

    def _encode(self, call_id: str, body: dict[str, Any]) -> bytes | None:
        try:
            return self.rpc.codec.encode(body)
        except Exception as exc:
            _warnings.warning(
                f"{self.topic}:encode",
                "%s: the reply to %s could not be encoded; sending an error reply (%r)",
                self.topic,
                call_id,
                exc,
            )
            try:
                return self.rpc.codec.encode(
                    _error(
                        call_id,
                        type(exc).__name__,
                        f"the handler's result could not be encoded: {exc}",
                    )
                )
            except Exception:
                _log.exception("%s: the codec cannot encode an error reply", self.topic)
                return None


def responder_for(
    handlers: Handlers,
    results_topic: str,
    codec: Codec = JSON,
    authorize: Authorize | None = None,
    cache: ReplyCache | None = None,
) -> type[Consumer]:
    """A consumer class that answers the requests of a commands topic with ``handlers``.

    A handler runs once per request: whatever fails after it (a result the codec cannot
    encode, a reply that could not be sent and is retried) never runs it again, and every
    failure reaches the caller as an error reply. A request whose id was answered in the last
    ``cache.ttl`` seconds (a client's retry, a redelivery after a crash of the reply's
    producer) gets that reply again. Arguments that do not fit the handler's signature and
    type hints get an ``InvalidArguments`` error reply; a request ``authorize`` refuses an
    ``Unauthorized`` one; neither runs the handler."""
    answering = _Answering(handlers, results_topic, codec, authorize, cache or ReplyCache())
    attributes = {"rpc": answering, "expired": 0, "malformed": 0, "duplicates": 0}
    return type("Responder", (Responder,), attributes)


@dataclass(frozen=True)
class _Answering:
    """What one responder route answers with."""

    handlers: Handlers
    results_topic: str
    codec: Codec
    authorize: Authorize | None
    replies: ReplyCache


_Reply = tuple[str, int | None, bytes, str, str | None]
"""(results topic, partition or None, encoded reply, key, reply cache key or None)."""


def _error(call_id: str, kind: str, message: str) -> dict[str, Any]:
    return {"id": call_id, "error": {"type": kind, "message": message}}
