"""The Broadcast sink with real WebSocket and SSE clients, fed from the real broker: per-key
order at every client with 64 lanes, a slow client dropped without slowing the others,
garbage closed with a protocol error, an unknown channel silent."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import websockets

from conveyor import App, Producer
from conveyor.connect.sinks import Broadcast
from helpers import running


class ClientLoop:
    """An asyncio loop on a thread for the test's clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Awaitable[Any], timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)  # type: ignore[arg-type]

    def start(self, coroutine: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)  # type: ignore[arg-type]

    def close(self) -> None:
        for task in asyncio.all_tasks(self.loop):  # clients still waiting (a failed test)
            self.loop.call_soon_threadsafe(task.cancel)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def subscribed(url: str, channels: list[str]) -> Any:
    socket = await websockets.connect(url, max_queue=None)
    await socket.send(json.dumps({"subscribe": channels}))
    assert json.loads(await socket.recv()) == {"subscribed": channels}
    return socket


async def receive(
    socket: Any,
    count: int,
    until: Callable[[dict[str, Any]], bool] | None = None,
    received: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """``count`` messages from ``socket`` (into ``received`` when given: a test that times out
    can say how far each client got)."""
    received = [] if received is None else received
    while len(received) < count:
        message = json.loads(await socket.recv())
        received.append(message)
        if until is not None and until(message):
            break
    return received


def silent_client(port: int, channels: list[str]) -> socket.socket:
    """A WebSocket client that subscribes and then reads nothing, with a small receive
    buffer (a client library would keep reading into its own memory)."""
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65_536)
    key = base64.b64encode(os.urandom(16)).decode()
    raw.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    assert raw.recv(4096).startswith(b"HTTP/1.1 101")
    payload = json.dumps({"subscribe": channels}).encode()
    assert len(payload) < 126
    mask = os.urandom(4)
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    raw.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    return raw


def make_app(bootstrap: str, topic: str, sink: Broadcast, lanes: int) -> App:
    app = App(
        client_id="test",
        kafka={"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"},
        concurrency=8,
        max_wait_time=0.2,
    )
    app.routes.sink(topic, sink, lanes=lanes)
    return app


def produce_keyed(bootstrap: str, topic: str, keys: int, sequences: int) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "key": f"k{key}", "payload": {"seq": seq}}
                for seq in range(sequences)
                for key in range(keys)
            ]
        )


def test_every_client_gets_its_channels_in_order_with_64_lanes(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    keys, sequences, clients = 1_000, 100, 10
    sink = Broadcast(port=0, queue_size=100_000)
    app = make_app(kafka_bootstrap, topic, sink, lanes=64)
    loop = ClientLoop()
    try:
        with running(app):
            url = f"ws://127.0.0.1:{sink.port}/ws"
            channels = [[f"k{key}" for key in range(c, keys, clients)] for c in range(clients)]
            sockets = [loop.run(subscribed(url, chosen)) for chosen in channels]
            per_client = keys // clients * sequences
            got: list[list[dict[str, Any]]] = [[] for _ in sockets]
            waiting = [
                loop.start(receive(socket, per_client, received=into))
                for socket, into in zip(sockets, got, strict=True)
            ]
            produce_keyed(kafka_bootstrap, topic, keys, sequences)
            try:
                results = [future.result(180) for future in waiting]
            except TimeoutError:
                raise AssertionError(
                    f"received {[len(g) for g in got]} of {per_client} each; the sink dropped "
                    f"{sink.dropped} client(s); the app: {app.snapshot().partitions}"
                ) from None
            for socket in sockets:
                loop.run(socket.close())
    finally:
        loop.close()
    for chosen, received in zip(channels, results, strict=True):
        per_key: dict[str, list[int]] = {}
        for message in received:
            per_key.setdefault(message["key"], []).append(message["payload"]["seq"])
        assert sorted(per_key) == sorted(chosen), "only its own channels"
        for key, seqs in per_key.items():
            assert seqs == list(range(sequences)), f"{key}: {seqs[:20]}"


class Progress:
    """How many messages a client has read, waited on by the producing thread."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def add(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.count >= count, timeout)


async def receive_counted(socket: Any, count: int, progress: Progress) -> list[dict[str, Any]]:
    received = []
    while len(received) < count:
        received.append(json.loads(await socket.recv()))
        progress.add()
    return received


def test_a_slow_client_is_dropped_and_the_others_go_on(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    sink = Broadcast(port=0, queue_size=600)  # above a batch (max_batch 500): bursts fit
    app = make_app(kafka_bootstrap, topic, sink, lanes=4)
    loop = ClientLoop()
    slow: socket.socket | None = None
    try:
        with running(app):
            url = f"ws://127.0.0.1:{sink.port}/ws"

            slow = silent_client(sink.port, ["k0"])  # reads nothing after subscribing
            fast = loop.run(subscribed(url, ["k0"]))
            progress = Progress()
            waiting = loop.start(receive_counted(fast, 5_000, progress))
            # 5,000 messages of 4 KB (20 MB): several times what the silent client's socket
            # buffers (the server's send buffer grows to 4 MB) and its queue of 600 hold. The
            # producer goes one chunk ahead of the fast client at most, so the fast client is
            # never more than 200 messages behind, however busy the machine (a fixed rate of
            # 1,000 msgs/s let a stall of 0.6 s drop it too).
            pad, count, chunk = "x" * 4_000, 5_000, 100
            with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
                for first in range(0, count, chunk):
                    assert progress.wait_for(first - chunk, 60), (
                        f"the fast client read {progress.count} of {first - chunk}"
                    )
                    producer.produce_many_async(
                        [
                            {"topic": topic, "key": "k0", "payload": {"seq": seq, "pad": pad}}
                            for seq in range(first, first + chunk)
                        ]
                    )
                producer.flush()
            received = waiting.result(120)
            assert [m["payload"]["seq"] for m in received] == list(range(count))
            assert sink.dropped == 1, "the slow one was dropped"
            loop.run(fast.close())
    finally:
        if slow is not None:
            slow.close()
        loop.close()


def test_garbage_is_a_protocol_error_and_an_unknown_channel_is_silent(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    sink = Broadcast(port=0)
    app = make_app(kafka_bootstrap, topic, sink, lanes=2)
    loop = ClientLoop()
    try:
        with running(app):
            url = f"ws://127.0.0.1:{sink.port}/ws"

            async def garbage() -> int | None:
                async with websockets.connect(url) as socket:
                    await socket.send("hello?")
                    try:
                        await socket.recv()
                    except websockets.ConnectionClosed as closed:
                        return closed.rcvd.code if closed.rcvd else None
                return None

            assert loop.run(garbage()) == 1002
            listener = loop.run(subscribed(url, ["nobody-sends-here", "marker"]))
            waiting = loop.start(receive(listener, 10, until=lambda m: m.get("key") == "marker"))
            with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
                producer.produce_many_sync(
                    [{"topic": topic, "key": "other", "payload": {"n": n}} for n in range(5)]
                    + [{"topic": topic, "key": "marker", "payload": {"n": 5}}]
                )
            received = waiting.result(60)
            assert [m["key"] for m in received] == ["marker"], "nothing but the marker"
            loop.run(listener.close())

            # Server-Sent Events: the same records, over plain HTTP
            events: list[str] = []
            with (
                httpx.Client(timeout=30) as client,
                client.stream(
                    "GET", f"http://127.0.0.1:{sink.port}/sse", params={"channel": "sse"}
                ) as response,
            ):
                lines = response.iter_lines()
                assert next(lines) == ": subscribed"
                with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
                    producer.produce_sync(topic=topic, key="sse", payload={"n": 1})
                for line in lines:
                    if line.startswith("data: "):
                        events.append(line)
                        break
            assert json.loads(events[0][6:])["payload"] == {"n": 1}
    finally:
        loop.close()


def test_a_batch_client_gets_waiting_records_as_arrays_in_order(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    # Room for the whole burst: this is about arrays in order, not about dropping a slow
    # client (a busy machine let 1,000 records queue up before the first frame went out).
    sink = Broadcast(port=0, queue_size=5_000)
    app = make_app(kafka_bootstrap, topic, sink, lanes=4)
    loop = ClientLoop()
    try:
        with running(app):
            url = f"ws://127.0.0.1:{sink.port}/ws"

            async def batch_client() -> Any:
                socket_ = await websockets.connect(url)
                await socket_.send(json.dumps({"subscribe": ["k0"], "batch": True}))
                assert json.loads(await socket_.recv()) == {"subscribed": ["k0"]}
                return socket_

            client = loop.run(batch_client())

            async def read_all(count: int) -> list[list[dict[str, Any]]]:
                messages: list[list[dict[str, Any]]] = []
                while sum(len(m) for m in messages) < count:
                    messages.append(json.loads(await client.recv()))
                return messages

            waiting = loop.start(read_all(2_000))
            produce_keyed(kafka_bootstrap, topic, keys=1, sequences=2_000)
            messages = waiting.result(60)
            loop.run(client.close())
    finally:
        loop.close()
    assert all(isinstance(message, list) for message in messages), "records come in arrays"
    seqs = [record["payload"]["seq"] for message in messages for record in message]
    assert seqs == list(range(2_000))


def test_a_client_continues_the_trace_of_each_record_it_is_pushed(
    kafka_bootstrap: str, new_topic
) -> None:
    """With tracing on, each pushed record (WebSocket and SSE) holds the ``traceparent`` of
    the span that delivered it (``published {topic}``, in the producer's trace): a client that
    extracts it and starts a span continues that trace. Without tracing, none is added."""
    from opentelemetry.propagate import extract  # noqa: PLC0415 - the otel extra
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415

    from integration.tracing.test_tracing import Spans  # noqa: PLC0415

    topic = new_topic(partitions=1)
    exporter = Spans()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = Broadcast(port=0)
    app = make_app(kafka_bootstrap, topic, sink, lanes=2)
    app.tracing.enable(tracer_provider=provider)
    loop = ClientLoop()
    try:
        with running(app):
            socket_ = loop.run(subscribed(f"ws://127.0.0.1:{sink.port}/ws", ["traced"]))
            waiting = loop.start(receive(socket_, 1))
            with (
                httpx.Client(timeout=30) as client,
                client.stream(
                    "GET", f"http://127.0.0.1:{sink.port}/sse", params={"channel": "traced"}
                ) as response,
            ):
                lines = response.iter_lines()
                assert next(lines) == ": subscribed"
                app.producer.produce_sync(topic=topic, key="traced", payload={"n": 1})
                event = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
            [pushed] = waiting.result(60)
            loop.run(socket_.close())
            app.tracing.disable()
            plain = loop.run(subscribed(f"ws://127.0.0.1:{sink.port}/ws", ["plain"]))
            waiting = loop.start(receive(plain, 1))
            app.producer.produce_sync(topic=topic, key="plain", payload={"n": 2})
            [untraced] = waiting.result(60)
            loop.run(plain.close())
        exporter.wait_for(lambda done: any(s.name == f"published {topic}" for s in done))
    finally:
        loop.close()
    send = exporter.one(f"send {topic}")
    published = exporter.one(f"published {topic}")
    assert pushed["payload"] == event["payload"] == {"n": 1}
    assert pushed["traceparent"] == event["traceparent"], "the same delivery, either way"
    assert pushed["headers"]["traceparent"] != pushed["traceparent"], "the producer's, as it came"
    assert "traceparent" not in untraced, "tracing off: the record as before"

    # what the client does: the pushed context is the parent of its own span
    tracer = provider.get_tracer("browser")
    with tracer.start_as_current_span(
        "render order", context=extract({"traceparent": pushed["traceparent"]})
    ) as rendered:
        pass
    provider.shutdown()
    assert published.context.trace_id == send.context.trace_id, "the sink's span: the same trace"
    assert rendered.get_span_context().trace_id == send.context.trace_id
    assert rendered.parent is not None
    assert rendered.parent.span_id == published.context.span_id, "a child of the sink's span"
