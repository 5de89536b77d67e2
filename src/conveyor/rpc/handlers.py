"""The server side of RPC: named handlers and the consumer that answers requests."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from conveyor.consumer import Consumer
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import Message
from conveyor.processing.workers import run_hook
from conveyor.serialization import json_dumps, json_loads

__all__ = ["JSON", "Codec", "Handlers", "responder_for"]


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

    def register(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._handlers:
                raise ValueError(f"an RPC handler named {name!r} is already registered")
            self._handlers[name] = function
            return function

        return decorate

    def get(self, name: str) -> Callable[..., Any] | None:
        return self._handlers.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


def responder_for(handlers: Handlers, results_topic: str, codec: Codec = JSON) -> type[Consumer]:
    """A consumer class that answers the requests of a commands topic with ``handlers``.

    A handler runs once per request: whatever fails after it (a result the codec cannot
    encode, a reply that could not be sent and is retried) never runs it again, and every
    failure reaches the caller as an error reply."""

    class Responder(Consumer):
        expired = 0
        """Requests skipped because their caller's deadline had passed."""
        malformed = 0
        """Messages on the commands topic that were not requests (dropped, logged)."""

        def consume(self) -> None:
            answered: dict[int, _Reply | None] = self.__dict__.setdefault("_answered", {})
            app = getattr(self, "app", None)  # set by an App; tests may run it bare
            tracing = app.tracing if app is not None else None
            # A batch of one is traced as the request's child already; in a larger batch each
            # request gets its own span, so that its reply continues its caller's trace.
            traced = tracing is not None and tracing.enabled and len(self.messages) > 1
            for message in self.messages:
                if traced:
                    assert tracing is not None
                    with tracing.message_span(message):
                        self._respond(message, answered)
                else:
                    self._respond(message, answered)

        def _respond(self, message: Message, answered: dict[int, _Reply | None]) -> None:
            offset = message.offset
            if offset not in answered:  # a retry re-sends the reply, never re-runs
                answered[offset] = self._answer(message.raw_payload)
            reply = answered[offset]
            if reply is not None:
                topic, partition, payload, key = reply
                # The reply goes out before the request is marked: at-least-once.
                self.produce_sync(topic=topic, payload=payload, key=key, partition=partition)
            del answered[offset]
            self.mark_as_consumed(message)

        def _answer(self, raw: bytes | None) -> _Reply | None:
            try:
                request = codec.decode(raw or b"")
                if not isinstance(request, dict):
                    raise TypeError(f"a request is a mapping, not {type(request).__name__}")
                call_id = str(request["id"])
                partition = request.get("reply_partition")
                if partition is not None and (
                    isinstance(partition, bool) or not isinstance(partition, int)
                ):
                    raise TypeError(f"reply_partition must be an integer, not {partition!r}")
            except Exception as exc:
                Responder.malformed += 1
                _warnings.warning(
                    f"{self.topic}:malformed",
                    "%s: dropping a message that is not an RPC request (%r)",
                    self.topic,
                    exc,
                )
                return None
            reply_to = str(request.get("reply_to") or results_topic)
            deadline = request.get("deadline")
            if isinstance(deadline, int | float) and time.time() * 1000 > deadline:
                Responder.expired += 1
                return None  # the caller gave up already
            name = request.get("name", "")
            handler = handlers.get(name) if isinstance(name, str) else None
            if handler is None:
                body: dict[str, Any] = _error(
                    call_id, "UnknownCommand", f"no handler named {name!r}"
                )
            else:
                try:
                    result = run_hook(
                        handler(*request.get("args", ()), **request.get("kwargs", {}))
                    )
                    body = {"id": call_id, "ok": result}
                except Exception as exc:
                    body = _error(call_id, type(exc).__name__, str(exc))
            try:
                payload = codec.encode(body)
            except Exception as exc:
                _warnings.warning(
                    f"{self.topic}:encode",
                    "%s: the reply to %s could not be encoded; sending an error reply (%r)",
                    self.topic,
                    call_id,
                    exc,
                )
                try:
                    payload = codec.encode(
                        _error(
                            call_id,
                            type(exc).__name__,
                            f"the handler's result could not be encoded: {exc}",
                        )
                    )
                except Exception:
                    _log.exception("%s: the codec cannot encode an error reply", self.topic)
                    return None
            return reply_to, partition, payload, call_id

    return Responder


_Reply = tuple[str, int | None, bytes, str]
"""(results topic, partition or None, encoded reply, key)."""


def _error(call_id: str, kind: str, message: str) -> dict[str, Any]:
    return {"id": call_id, "error": {"type": kind, "message": message}}
