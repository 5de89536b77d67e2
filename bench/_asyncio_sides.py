"""One side of one figure of ``bench/asyncio_peers.py``, in a process of its own; prints one
JSON line with what it measured.

    python _asyncio_sides.py SIDE FIGURE --bootstrap HOST:PORT --topic T [--out T] ...

Sides: ``conveyor`` (awaited produce and an ``async def consume()``), ``conveyor-sync``
(``produce_sync``), ``aiokafka``, ``faststream`` and ``bare`` (confluent-kafka). The peers run
in the benchmark's own environment (aiokafka and FastStream are not Conveyor's dependencies),
so this file imports each side's library only inside its function.

Every producer acknowledges with ``acks=all`` and idempotence, lingering 0 ms: Conveyor's
defaults, set on the peers too.
"""

# ruff: noqa: PLC0415 -- each side imports its library only when it runs: the peers' environment
# has no Conveyor and Conveyor's has no peers

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

PAYLOAD = b"x" * 100
WARM_UP = 100
WINDOW = 1_000  # awaits in flight in the in-flight figure


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _latencies(samples: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(samples),
        "p99": _percentile(samples, 0.99),
        "count": float(len(samples)),
    }


class LoopLag:
    """A ticker task on the running loop: how late each 5 ms sleep wakes (ms)."""

    PERIOD = 0.005

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.recording = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._tick())

    def stop(self) -> None:
        """From any thread: stop ticking."""
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.PERIOD
            await asyncio.sleep(self.PERIOD)
            if self.recording:
                self.lags.append(max(0.0, loop.time() - due) * 1000)

    def p99(self) -> float:
        return _percentile(self.lags, 0.99) if self.lags else float("nan")


# -- (a) sequential awaited produce --------------------------------------------------------


async def _sequential(send: Callable[[], Awaitable[Any]], count: int) -> dict[str, float]:
    for _ in range(WARM_UP):
        await send()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await send()
        samples.append((time.perf_counter() - started) * 1000)
    return _latencies(samples)


def sequential_conveyor(args: argparse.Namespace) -> dict[str, float]:
    from conveyor import Producer

    async def main() -> dict[str, float]:
        with Producer({"bootstrap.servers": args.bootstrap}) as producer:
            return await _sequential(
                lambda: producer.produce_async(topic=args.topic, payload=PAYLOAD), args.count
            )

    return asyncio.run(main())


def sequential_conveyor_sync(args: argparse.Namespace) -> dict[str, float]:
    from conveyor import Producer

    with Producer({"bootstrap.servers": args.bootstrap}) as producer:
        for _ in range(WARM_UP):
            producer.produce_sync(topic=args.topic, payload=PAYLOAD)
        samples = []
        for _ in range(args.count):
            started = time.perf_counter()
            producer.produce_sync(topic=args.topic, payload=PAYLOAD)
            samples.append((time.perf_counter() - started) * 1000)
    return _latencies(samples)


def _aiokafka_producer(args: argparse.Namespace) -> Any:
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(
        bootstrap_servers=args.bootstrap, acks="all", enable_idempotence=True, linger_ms=0
    )


def sequential_aiokafka(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        producer = _aiokafka_producer(args)
        await producer.start()
        try:
            return await _sequential(
                lambda: producer.send_and_wait(args.topic, PAYLOAD), args.count
            )
        finally:
            await producer.stop()

    return asyncio.run(main())


def _bare_producer(args: argparse.Namespace) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {"bootstrap.servers": args.bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 0}
    )  # fmt: skip


def sequential_bare(args: argparse.Namespace) -> dict[str, float]:
    """produce, then flush: the bare loop's wait for one message's acknowledgement."""
    producer = _bare_producer(args)
    for _ in range(WARM_UP):
        producer.produce(args.topic, PAYLOAD)
        producer.flush(10)
    samples = []
    for _ in range(args.count):
        started = time.perf_counter()
        producer.produce(args.topic, PAYLOAD)
        producer.flush(10)
        samples.append((time.perf_counter() - started) * 1000)
    return _latencies(samples)


# -- (b) many awaits in flight --------------------------------------------------------------


async def _windows(send: Callable[[], Awaitable[Any]], count: int) -> dict[str, float]:
    """``count`` messages, ``WINDOW`` awaits at a time gathered: msgs/s."""
    await asyncio.gather(*(send() for _ in range(WINDOW)))  # connected and warm
    started = time.perf_counter()
    for _ in range(count // WINDOW):
        await asyncio.gather(*(send() for _ in range(WINDOW)))
    return {"rate": (count // WINDOW) * WINDOW / (time.perf_counter() - started)}


def inflight_conveyor(args: argparse.Namespace) -> dict[str, float]:
    from conveyor import Producer

    async def main() -> dict[str, float]:
        with Producer({"bootstrap.servers": args.bootstrap}) as producer:

            async def send() -> Any:
                return await producer.produce_async(topic=args.topic, payload=PAYLOAD)

            return await _windows(send, args.count)

    return asyncio.run(main())


def inflight_aiokafka(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        producer = _aiokafka_producer(args)
        await producer.start()
        try:

            async def send() -> Any:
                return await (await producer.send(args.topic, PAYLOAD))

            return await _windows(send, args.count)
        finally:
            await producer.stop()

    return asyncio.run(main())


def _faststream_broker(args: argparse.Namespace) -> Any:
    from faststream.kafka import KafkaBroker

    return KafkaBroker(
        args.bootstrap, acks="all", enable_idempotence=True, linger_ms=0, logger=None
    )


def inflight_faststream(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        broker = _faststream_broker(args)
        async with broker:
            await broker.start()
            return await _windows(lambda: broker.publish(PAYLOAD, args.topic), args.count)

    return asyncio.run(main())


async def _gathered(send: Callable[[], Any], count: int) -> dict[str, float]:
    """``count`` messages, ``WINDOW`` at a time: each ``send()`` returns what is awaited (a
    future, a handle), and the window's are gathered."""

    async def window() -> None:
        pending = [await _ready(send()) for _ in range(WINDOW)]
        await asyncio.gather(*pending)

    await window()
    started = time.perf_counter()
    for _ in range(count // WINDOW):
        await window()
    return {"rate": (count // WINDOW) * WINDOW / (time.perf_counter() - started)}


async def _ready(sent: Any) -> Any:
    """aiokafka's ``send`` is a coroutine that returns the future; Conveyor's returns the handle."""
    return await sent if asyncio.iscoroutine(sent) else sent


def gathered_conveyor(args: argparse.Namespace) -> dict[str, float]:
    from conveyor import Producer

    async def main() -> dict[str, float]:
        with Producer({"bootstrap.servers": args.bootstrap}) as producer:
            return await _gathered(
                lambda: producer.produce_async(topic=args.topic, payload=PAYLOAD), args.count
            )

    return asyncio.run(main())


def gathered_aiokafka(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        producer = _aiokafka_producer(args)
        await producer.start()
        try:
            return await _gathered(lambda: producer.send(args.topic, PAYLOAD), args.count)
        finally:
            await producer.stop()

    return asyncio.run(main())


def gathered_faststream(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        broker = _faststream_broker(args)
        async with broker:
            await broker.start()
            return await _gathered(
                lambda: broker.publish(PAYLOAD, args.topic, no_confirm=True), args.count
            )

    return asyncio.run(main())


def inflight_bare(args: argparse.Namespace) -> dict[str, float]:
    """A produce loop that serves its reports as it goes, then flushes: the driver's pace."""
    producer = _bare_producer(args)
    for _ in range(WINDOW):
        producer.produce(args.topic, PAYLOAD)
    producer.flush(30)
    count = args.count // WINDOW * WINDOW
    started = time.perf_counter()
    for n in range(count):
        try:
            producer.produce(args.topic, PAYLOAD)
        except BufferError:
            producer.poll(0.01)
            producer.produce(args.topic, PAYLOAD)
        if n % 128 == 0:
            producer.poll(0)
    producer.flush(60)
    return {"rate": count / (time.perf_counter() - started)}


# -- (c) consume-transform-produce, one awaited produce per message; (d) the loop's lag -----


class _Progress:
    """Counts processed messages; ``done`` once ``target`` were; the window starts at the
    first one."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.done = threading.Event()

    def processed(self) -> None:
        if not self.count:
            self.first = time.perf_counter()
        self.count += 1
        if self.count == self.target:
            self.last = time.perf_counter()
            self.done.set()

    def result(self, lag: LoopLag | None) -> dict[str, float]:
        figures = {"rate": self.count / (self.last - self.first)}
        if lag is not None:
            figures["lag_p99"] = lag.p99()
        return figures


def transform_conveyor(args: argparse.Namespace) -> dict[str, float]:
    from conveyor import App, Consumer

    progress, lag = _Progress(args.count), LoopLag()
    out = args.out

    class Transform(Consumer):
        async def consume(self) -> None:
            if not lag.recording:
                lag.recording = True
                lag.start()  # on the app's loop, where the lanes run
            for message in self.messages:
                await self.produce_async(topic=out, key=message.key, payload=message.payload)
                progress.processed()

    app = App(
        client_id="bench-asyncio",
        kafka={"bootstrap.servers": args.bootstrap, "group.id": args.group,
               "auto.offset.reset": "earliest"},
    )  # fmt: skip
    lanes = {"max_partitions": args.lanes, "partitioner": lambda message: message.offset}
    app.routes.topic(args.topic, Transform, virtual_partitions=lanes if args.lanes else None)
    app.start()
    try:
        if not progress.done.wait(600):
            raise SystemExit(f"conveyor: {progress.count} of {args.count} in 600 s")
    finally:
        lag.recording = False
        lag.stop()
        app.stop_and_wait()
    return progress.result(lag)


def transform_aiokafka(args: argparse.Namespace) -> dict[str, float]:
    from aiokafka import AIOKafkaConsumer

    async def main() -> dict[str, float]:
        progress, lag = _Progress(args.count), LoopLag()
        consumer = AIOKafkaConsumer(
            args.topic, bootstrap_servers=args.bootstrap, group_id=args.group,
            auto_offset_reset="earliest",
        )  # fmt: skip
        producer = _aiokafka_producer(args)
        await producer.start()
        await consumer.start()
        lag.start()
        try:
            async for message in consumer:
                lag.recording = True
                payload = json.loads(message.value)
                await producer.send_and_wait(
                    args.out, json.dumps(payload).encode(), key=message.key
                )
                progress.processed()
                if progress.done.is_set():
                    break
        finally:
            lag.recording = False
            await consumer.stop()
            await producer.stop()
        return progress.result(lag)

    return asyncio.run(main())


def transform_faststream(args: argparse.Namespace) -> dict[str, float]:
    async def main() -> dict[str, float]:
        progress, lag = _Progress(args.count), LoopLag()
        broker = _faststream_broker(args)
        finished = asyncio.Event()

        @broker.subscriber(args.topic, group_id=args.group, auto_offset_reset="earliest")
        @broker.publisher(args.out)
        async def transform(body: dict[str, Any]) -> dict[str, Any]:
            lag.recording = True
            progress.processed()
            if progress.count == progress.target:
                finished.set()
            return body

        async with broker:
            await broker.start()
            lag.start()
            try:
                await asyncio.wait_for(finished.wait(), 600)
                await asyncio.sleep(0.1)  # the last return is published after the handler
            finally:
                lag.recording = False
        return progress.result(lag)

    return asyncio.run(main())


def transform_bare(args: argparse.Namespace) -> dict[str, float]:
    """The driver's pace: consume a batch, produce each output, flush once per batch."""
    from confluent_kafka import Consumer

    progress = _Progress(args.count)
    consumer = Consumer(
        {"bootstrap.servers": args.bootstrap, "group.id": args.group,
         "auto.offset.reset": "earliest"}
    )  # fmt: skip
    producer = _bare_producer(args)
    consumer.subscribe([args.topic])
    deadline = time.monotonic() + 600
    try:
        while not progress.done.is_set() and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(500, 0.5) if m.error() is None]
            for message in batch:
                payload = json.loads(message.value())
                producer.produce(args.out, json.dumps(payload).encode(), key=message.key())
                producer.poll(0)
            producer.flush(30)
            for _ in batch:
                progress.processed()
    finally:
        consumer.close()
        producer.flush(30)
    return progress.result(None)


SIDES: dict[tuple[str, str], Callable[[argparse.Namespace], dict[str, float]]] = {
    ("conveyor", "sequential"): sequential_conveyor,
    ("conveyor-sync", "sequential"): sequential_conveyor_sync,
    ("aiokafka", "sequential"): sequential_aiokafka,
    ("bare", "sequential"): sequential_bare,
    ("conveyor", "inflight"): inflight_conveyor,
    ("aiokafka", "inflight"): inflight_aiokafka,
    ("faststream", "inflight"): inflight_faststream,
    ("bare", "inflight"): inflight_bare,
    ("conveyor", "gathered"): gathered_conveyor,
    ("aiokafka", "gathered"): gathered_aiokafka,
    ("faststream", "gathered"): gathered_faststream,
    ("conveyor", "transform"): transform_conveyor,
    ("aiokafka", "transform"): transform_aiokafka,
    ("faststream", "transform"): transform_faststream,
    ("bare", "transform"): transform_bare,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side")
    parser.add_argument("figure")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", default="")
    parser.add_argument("--group", default="")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--lanes", type=int, default=0, help="virtual partitions per partition")
    args = parser.parse_args()
    print(json.dumps(SIDES[(args.side, args.figure)](args)), flush=True)


if __name__ == "__main__":
    main()
