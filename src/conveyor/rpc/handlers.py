"""The server side of RPC: named handlers and the consumer that answers requests."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from conveyor.consumer import Consumer
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
    """A consumer class that answers the requests of a commands topic with ``handlers``."""

    class Responder(Consumer):
        expired = 0

        def consume(self) -> None:
            for message in self.messages:
                reply = self._answer(message.raw_payload)
                if reply is not None:
                    topic, partition, payload, key = reply
                    # The reply goes out before the request is marked: at-least-once.
                    self.produce_sync(topic=topic, payload=payload, key=key,
                                      partition=partition if partition is not None else None)  # fmt: skip
                self.mark_as_consumed(message)

        def _answer(self, raw: bytes | None) -> tuple[str, int | None, bytes, str] | None:
            try:
                request = codec.decode(raw or b"")
                call_id = str(request["id"])
            except (ValueError, KeyError, TypeError) as exc:
                _log.warning("%s: dropping a request that is not one (%r)", self.topic, exc)
                return None
            reply_to = request.get("reply_to") or results_topic
            partition = request.get("reply_partition")
            deadline = request.get("deadline")
            if deadline is not None and time.time() * 1000 > deadline:
                Responder.expired += 1
                return None  # the caller gave up already
            handler = handlers.get(request.get("name", ""))
            if handler is None:
                body: dict[str, Any] = {"id": call_id, "error": {"type": "UnknownCommand",
                                                                   "message": f"no handler named {request.get('name')!r}"}}  # fmt: skip
            else:
                try:
                    result = run_hook(
                        handler(*request.get("args", []), **request.get("kwargs", {}))
                    )
                    body = {"id": call_id, "ok": result}
                except Exception as exc:
                    body = {
                        "id": call_id,
                        "error": {"type": type(exc).__name__, "message": str(exc)},
                    }
            return reply_to, partition, codec.encode(body), call_id

    return Responder
