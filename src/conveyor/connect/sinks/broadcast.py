"""``Broadcast``: records pushed to WebSocket and Server-Sent Events subscribers by channel
(Starlette + uvicorn; extra ``conveyor[broadcast]``) — the Kafka-to-browser bridge.

Clients connect to ``ws://host:port/ws`` and send ``{"subscribe": ["orders-42", ...]}`` (and
``{"unsubscribe": [...]}``; each is answered ``{"subscribed": [...]}`` /
``{"unsubscribed": [...]}``, after which records of those channels come; with ``"batch":
true`` in a request, records that wait for the client come as one message, a JSON array, in
order), or open ``GET /sse?channel=orders-42&channel=...``. Every record
goes to the subscribers of its channel (``channel(record)``: the key by default), as one JSON
text (``encode(record)``), in the order ``deliver`` got them, so order per key holds at each
client. A client that cannot keep up (its queue of ``queue_size`` messages is full) is
dropped, with close code 1013 (try again later), and never slows the others; a client that
sends something that is not a subscription is closed with 1002 (protocol error). A
subscription to a channel no record goes to receives nothing.

With tracing on (``app.tracing.enable()``), each record's JSON also holds ``"traceparent"``
(``trace_field``): the W3C context of the span that delivered it (``published {topic}``, in
the record's trace), for the client to continue the trace from. Without tracing, records are
pushed as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.connect.sink import Reject, Result
from conveyor.connect.sinks.records import encoded_record, record_json
from conveyor.connect.trace_context import delivery_traceparent
from conveyor.errors import ConfigurationError
from conveyor.serialization import json_dumps

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["Broadcast"]

_log = logging.getLogger("conveyor.connect")

PROTOCOL_ERROR = 1002
TRY_AGAIN_LATER = 1013
_DROPPED = object()  # put in a subscriber's queue when it fell behind


def _key_channel(record: Message) -> str:
    key = record.raw_key
    return "" if key is None else key.decode("utf-8", "replace")


class _Subscriber:
    """One connected client: its channels, its bounded queue (the server loop's), and whether
    it takes records in batches (one WebSocket message holding a JSON array)."""

    __slots__ = ("batch", "channels", "queue")

    def __init__(self, size: int) -> None:
        self.channels: set[str] = set()
        self.queue: asyncio.Queue[Any] = asyncio.Queue(size)
        self.batch = False


class _Control(str):
    """A reply to the client (an acknowledgement): always sent on its own."""

    __slots__ = ()


_BATCH_LIMIT = 1_000  # records per batched WebSocket message, at most


class Broadcast:
    """Pushes records to subscribed WebSocket and SSE clients (see the module).

    The server runs on a thread of its own; ``deliver`` only encodes each record and queues it
    for that thread, so it never blocks: an app whose sink routes are Broadcasts needs no
    more worker threads than cores (``App(concurrency=...)``; more only add GIL hand-overs —
    lanes are not threads and may be many).

    Args:
        host: the address the server listens on.
        port: its port (0: a free one, see ``port`` once started).
        channel: a record's channel, ``channel(record) -> str`` (default: its key as text;
            keyless records go to the channel ``""``).
        encode: shapes what subscribers get, ``encode(record) -> dict`` (default:
            :func:`~conveyor.connect.sinks.records.record_json`).
        queue_size: records waiting for one client, at most; a client that lets it fill is
            dropped (close code 1013) and never slows the others.
        trace_field: with tracing on, the field of each record's JSON object that holds the
            W3C ``traceparent`` of the span that delivered it (``None``: none is added; an
            ``encode`` that makes something other than an object, or has that field already,
            gets none either).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        channel: Callable[[Message], str] = _key_channel,
        encode: Callable[[Message], Any] = record_json,
        queue_size: int = 1_000,
        trace_field: str | None = "traceparent",
    ) -> None:
        if trace_field is not None and (not isinstance(trace_field, str) or not trace_field):
            raise ConfigurationError(
                f"Broadcast: trace_field must be a field name or None, got {trace_field!r}",
                "trace_field",
            )
        self.host = host
        self.trace_field = trace_field
        self.port = port
        self._channel = channel
        self._encode = encode
        self.queue_size = queue_size
        self._channels: dict[str, set[_Subscriber]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.dropped = 0
        """Clients dropped because they fell behind."""

    # -- the sink -----------------------------------------------------------------------------

    def open(self) -> None:
        try:
            import uvicorn  # noqa: PLC0415 - optional dependencies
            from starlette.applications import Starlette  # noqa: PLC0415
            from starlette.routing import Route  # noqa: PLC0415
        except ImportError as error:
            raise ConfigurationError(
                "the Broadcast sink needs starlette, uvicorn and websockets: "
                "pip install 'conveyor[broadcast]'",
                "sink",
            ) from error
        self._starlette = Starlette(routes=[Route("/sse", self._sse)], lifespan=self._lifespan)
        from uvicorn.config import WS_PROTOCOLS  # noqa: PLC0415

        # uvicorn's legacy websockets protocol warns that it is deprecated; use its successor
        ws = "websockets-sansio" if "websockets-sansio" in WS_PROTOCOLS else "websockets"
        # Compressing each message for each client (permessage-deflate) cost more CPU than
        # anything else in the fan-out; records are small JSON texts.
        config = uvicorn.Config(
            self._asgi,
            interface="asgi3",  # a bound method: uvicorn's guess would take it for ASGI 2
            host=self.host,
            port=self.port,
            log_level="warning",
            ws=ws,
            ws_per_message_deflate=False,
        )
        # Bound and listening here, so that the port is known (port=0: the one chosen) and a
        # bind error surfaces now; clients that connect before uvicorn serves wait in the backlog.
        try:
            listener = socket.create_server((self.host, self.port), backlog=1024)
        except OSError as error:
            raise ConfigurationError(
                f"the Broadcast sink could not listen on {self.host}:{self.port}: {error}", "port"
            ) from error
        self.port = listener.getsockname()[1]
        self._server = uvicorn.Server(config)
        ready = threading.Event()
        self._ready = ready
        self._thread = threading.Thread(
            target=self._server.run, args=([listener],), name="conveyor-broadcast", daemon=True
        )
        self._thread.start()
        if not ready.wait(30):  # the lifespan's startup: the loop runs and takes deliveries
            self._server.should_exit = True
            raise ConfigurationError("the Broadcast sink's server did not start in 30 s", "sink")

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Any) -> AsyncIterator[None]:
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        yield

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        results: list[Result] = []
        outgoing: list[tuple[str, str]] = []
        field = self.trace_field
        for record in records:
            try:
                traceparent = None if field is None else delivery_traceparent(record)
                if field is None or traceparent is None:
                    text = encoded_record(record, self._encode).decode("utf-8")
                else:
                    text = self._traced(record, field, traceparent)
                outgoing.append((self._channel(record), text))
            except Exception as error:
                results.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))
                continue
            results.append(None)
        loop = self._loop
        if outgoing and loop is not None:
            loop.call_soon_threadsafe(self._fan_out, outgoing)
        return results

    def _traced(self, record: Message, field: str, traceparent: str) -> str:
        """``record`` as JSON with the context of the span delivering it in ``field``."""
        document = self._encode(record)
        if isinstance(document, dict) and field not in document:
            document = {**document, field: traceparent}
        return json_dumps(document).decode("utf-8")

    def _fan_out(self, outgoing: list[tuple[str, str]]) -> None:
        """On the server's loop: put each text in its channel's subscribers' queues."""
        channels = self._channels
        for channel, text in outgoing:
            for subscriber in tuple(channels.get(channel, ())):
                try:
                    subscriber.queue.put_nowait(text)
                except asyncio.QueueFull:
                    self._drop(subscriber)

    def _drop(self, subscriber: _Subscriber) -> None:
        _log.warning(
            "broadcast: dropping a client of %s: %s messages behind",
            ", ".join(sorted(subscriber.channels)[:5]) or "no channel",
            subscriber.queue.qsize(),
        )
        self._forget(subscriber)
        self.dropped += 1
        while not subscriber.queue.empty():
            subscriber.queue.get_nowait()
        subscriber.queue.put_nowait(_DROPPED)

    def _forget(self, subscriber: _Subscriber) -> None:
        for channel in subscriber.channels:
            members = self._channels.get(channel)
            if members is not None:
                members.discard(subscriber)
                if not members:
                    del self._channels[channel]

    def _subscribe(self, subscriber: _Subscriber, channels: list[str], on: bool) -> None:
        for channel in channels:
            if on:
                subscriber.channels.add(channel)
                self._channels.setdefault(channel, set()).add(subscriber)
            else:
                subscriber.channels.discard(channel)
                members = self._channels.get(channel)
                if members is not None:
                    members.discard(subscriber)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(10)
        self._server = self._thread = self._loop = None

    # -- the endpoints --------------------------------------------------------------------------

    async def _asgi(self, scope: Any, receive: Any, send: Any) -> None:
        """``/ws`` straight on ASGI (a record goes to a client once per subscriber: Starlette's
        WebSocket wrapper and its exception middleware around every send were a third of the
        fan-out's cost); the rest (``/sse``, lifespan, unknown paths) through Starlette."""
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            await self._websocket(receive, send)
        else:
            await self._starlette(scope, receive, send)

    async def _websocket(self, receive: Any, send: Any) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        subscriber = _Subscriber(self.queue_size)
        sender = asyncio.create_task(self._send(send, subscriber))
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                request = None if text is None else _parse(text)
                if request is None:  # not JSON, not a subscription, or binary
                    await send(
                        {
                            "type": "websocket.close",
                            "code": PROTOCOL_ERROR,
                            "reason": 'send {"subscribe": [channels]}',
                        }
                    )
                    return
                if "batch" in request:
                    subscriber.batch = bool(request.pop("batch"))
                for action, channels in request.items():
                    self._subscribe(subscriber, channels, on=action == "subscribe")
                    # in the queue, so it comes after everything sent before the change
                    subscriber.queue.put_nowait(_Control(json.dumps({f"{action}d": channels})))
        except OSError:
            return  # gone meanwhile (uvicorn's ClientDisconnected)
        finally:
            self._forget(subscriber)
            sender.cancel()

    async def _send(self, send: Any, subscriber: _Subscriber) -> None:
        queue = subscriber.queue
        held: Any = None  # taken from the queue while batching, sent next, in its turn
        try:
            while True:
                text = held if held is not None else await queue.get()
                held = None
                if text is _DROPPED:
                    await send(
                        {"type": "websocket.close", "code": TRY_AGAIN_LATER, "reason": "too slow"}
                    )
                    return
                if isinstance(text, _Control) or not subscriber.batch:
                    await send({"type": "websocket.send", "text": text})
                    continue
                # Everything waiting, as one message: a frame per record per client was the
                # fan-out's cost at tens of thousands of records a second.
                texts = [text]
                while len(texts) < _BATCH_LIMIT and not queue.empty():
                    following = queue.get_nowait()
                    if following is _DROPPED or isinstance(following, _Control):
                        held = following
                        break
                    texts.append(following)
                await send({"type": "websocket.send", "text": "[" + ",".join(texts) + "]"})
        except Exception:  # the client went away meanwhile
            return

    async def _sse(self, request: Any) -> Any:
        from starlette.responses import StreamingResponse  # noqa: PLC0415

        subscriber = _Subscriber(self.queue_size)
        self._subscribe(subscriber, request.query_params.getlist("channel"), on=True)

        async def events() -> Any:
            try:
                yield ": subscribed\n\n"
                while True:
                    text = await subscriber.queue.get()
                    if text is _DROPPED:
                        yield "event: dropped\ndata: too slow\n\n"
                        return
                    yield f"data: {text}\n\n"
            finally:
                self._forget(subscriber)

        return StreamingResponse(events(), media_type="text/event-stream")


def _parse(text: str) -> dict[str, list[str]] | None:
    """``{"subscribe": [...], "unsubscribe": [...]}`` with string channels, else ``None``."""
    try:
        request = json.loads(text)
    except ValueError:
        return None
    if not isinstance(request, dict) or not request:
        return None
    if set(request) - {"subscribe", "unsubscribe", "batch"}:
        return None
    if not isinstance(request.get("batch", False), bool):
        return None
    for action, channels in request.items():
        if action == "batch":
            continue
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            return None
    return request
