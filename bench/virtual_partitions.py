"""Virtual partitions: one partition, a consumer that waits 1 ms of I/O per message (a sleep),
run in 1, 4, 16 and 64 lanes, beside a Conveyor consumer without lanes and a bare
confluent-kafka loop that does the same 1 ms per message, all in the same run.

Throughput: each variant reads its own topic, filled the same way (one partition, 1,000
keys round-robin), msgs/s as harness.RateMeter defines it. Latency: each variant's own topic
fed at a steady rate below what one lane handles (a bare producer, 400 msgs/s), p50 and p99
of produce -> the message's 1 ms done. Per-key order is checked in every run (each key's
sequence numbers must arrive in order): a run that breaks it stops the script. Target
(issue 15): >= 10x the throughput of 1 lane at 16 lanes.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer as BareConsumer
from confluent_kafka import Producer as BareProducer

from conveyor import App, Consumer
from harness import Bench, Figure, RateMeter, percentile

WORK = 0.001  # seconds of simulated I/O per message
KEYS = 1_000
RATE = 400  # msgs/s for the latency runs
LANES = (1, 4, 16, 64)
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


class OrderCheck:
    """Per key, the next sequence number expected; any other is an order violation."""

    def __init__(self) -> None:
        self._next: dict[bytes, int] = {}
        self._lock = threading.Lock()
        self.violations = 0

    def seen(self, key: bytes, seq: int) -> None:
        with self._lock:
            expected = self._next.get(key, 0)
            if seq != expected:
                self.violations += 1
            self._next[key] = seq + 1


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = BareProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for index in range(count):
        key, seq = index % KEYS, index // KEYS
        while True:
            try:
                producer.produce(topic, json.dumps({"seq": seq}).encode(), f"k{key}".encode())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("could not fill the benchmark topic")


def conveyor_throughput(bootstrap: str, topic: str, count: int, lanes: int | None) -> float:
    meter = RateMeter(count)
    order = OrderCheck()

    def on_message(key: bytes, value: bytes) -> None:
        order.seen(key, json.loads(value)["seq"])

    app = make_app(bootstrap, topic, lanes, on_message, meter.add)
    app.start()
    try:
        if not meter.done.wait(300):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
    check(order, f"{lanes} lanes" if lanes else "no lanes")
    return meter.rate()


def make_app(bootstrap: str, topic: str, lanes: int | None, on_message: Any, on_batch: Any) -> App:
    class Waiting(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                time.sleep(WORK)
                on_message(message.raw_key, message.raw_payload)
            on_batch(len(self.messages))

    app = App(
        client_id="bench",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        },
        concurrency=max(4, lanes or 1),
        max_messages=100,
        max_wait_time=0.5,
    )
    if lanes is None:
        app.routes.topic(topic, Waiting)
    else:
        app.routes.topic(topic, Waiting, virtual_partitions={"max_partitions": lanes})
    return app


def check(order: OrderCheck, label: str) -> None:
    if order.violations:
        raise SystemExit(f"{label}: {order.violations} messages out of order per key")


def bare_throughput(bootstrap: str, topic: str, count: int) -> float:
    """A confluent-kafka batch loop doing the same 1 ms per message (in order, one thread)."""
    consumer = BareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **LIKE_FOR_LIKE,
        }
    )
    consumer.subscribe([topic])
    meter = RateMeter(count)
    deadline = time.monotonic() + 300
    try:
        while not meter.done.is_set() and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=100, timeout=1.0)
            good = [message for message in batch if message.error() is None]
            for message in good:
                time.sleep(WORK)
                json.loads(message.value())
            meter.add(len(good))
    finally:
        consumer.close()
    return meter.rate()


def conveyor_latency(bootstrap: str, topic: str, seconds: float, lanes: int | None) -> list[float]:
    """Milliseconds from produce to done, for ``seconds`` of messages at RATE msgs/s."""
    samples: list[float] = []
    order = OrderCheck()
    lock = threading.Lock()
    assigned = threading.Event()
    expected = int(seconds * RATE)
    done = threading.Event()

    def on_message(key: bytes, value: bytes) -> None:
        body = json.loads(value)
        order.seen(key, body["seq"])
        with lock:
            samples.append((time.time() - body["sent"]) * 1000)
            if len(samples) >= expected:
                done.set()

    app = make_app(bootstrap, topic, lanes, on_message, lambda _count: None)
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
    app.start()
    try:
        if not assigned.wait(60):
            raise RuntimeError("no partition assigned")
        time.sleep(1.0)  # the listener's first fetch position is settled
        send_steadily(bootstrap, topic, expected)
        if not done.wait(120):
            raise RuntimeError(f"only {len(samples)} of {expected} latency samples")
    finally:
        app.stop_and_wait()
    check(order, f"latency, {lanes} lanes" if lanes else "latency, no lanes")
    return samples


def send_steadily(bootstrap: str, topic: str, count: int) -> None:
    producer = BareProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    started = time.perf_counter()
    for index in range(count):
        due = started + index / RATE
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        key, seq = index % KEYS, index // KEYS
        body = json.dumps({"seq": seq, "sent": time.time()}).encode()
        producer.produce(topic, body, f"k{key}".encode())
        producer.poll(0)
    producer.flush(30)


def arguments(parser: Any) -> None:
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each latency run")
    parser.add_argument(
        "--lanes", default=",".join(map(str, LANES)), help="lane counts to measure (with 1)"
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="fraction of the default message counts"
    )


def main() -> None:
    bench = Bench(
        "virtual_partitions",
        __doc__ or "",
        arguments,
    )
    lanes_measured = [int(lanes) for lanes in bench.args.lanes.split(",")]
    if 1 not in lanes_measured:
        raise SystemExit("--lanes must include 1 (the other counts are compared with it)")
    variants: list[int | None] = [None, *lanes_measured]
    # Enough messages for a few seconds of each variant (1 lane: ~1,000 msgs/s).
    counts = {
        lanes: max(
            100, int(bench.args.scale * (2_000 if lanes is None else 2_000 * min(lanes, 20)))
        )
        for lanes in variants
    }
    names = {
        lanes: "no lanes" if lanes is None else f"{lanes} lane{'s' if lanes > 1 else ''}"
        for lanes in variants
    }
    rates: dict[int | None, list[float]] = {lanes: [] for lanes in variants}
    bare: list[float] = []
    p50: dict[int | None, list[float]] = {lanes: [] for lanes in variants}
    p99: dict[int | None, list[float]] = {lanes: [] for lanes in variants}
    for attempt in range(1, bench.repeats + 1):
        # every run on topics of its own, filled the same way (one partition, 1,000 keys)
        bare_topic = bench.create_topic()
        fill(bench.bootstrap, bare_topic, counts[None])
        bare.append(bare_throughput(bench.bootstrap, bare_topic, counts[None]))
        for lanes in variants:
            topic = bench.create_topic()
            fill(bench.bootstrap, topic, counts[lanes])
            rates[lanes].append(conveyor_throughput(bench.bootstrap, topic, counts[lanes], lanes))
            samples = conveyor_latency(
                bench.bootstrap, bench.create_topic(), bench.args.seconds, lanes
            )
            p50[lanes].append(percentile(samples, 0.5))
            p99[lanes].append(percentile(samples, 0.99))
        bench.console.print(
            f"  run {attempt}/{bench.repeats}: bare {bare[-1]:,.0f} msgs/s; "
            + ", ".join(
                f"{names[lanes]} {rates[lanes][-1]:,.0f} msgs/s p50 {p50[lanes][-1]:.1f} ms "
                f"p99 {p99[lanes][-1]:.1f} ms"
                for lanes in variants
            )
        )
    bench.record(Figure(bench.name, "bare loop, 1 ms per message (baseline)", "msgs/s", bare))
    for lanes in variants:
        target = " (target >= 10x 1 lane)" if lanes == 16 else ""
        bench.record(
            Figure(
                bench.name,
                f"{names[lanes]}, throughput vs bare loop",
                "msgs/s",
                rates[lanes],
                bare,
                note="per-key order checked",
            )
        )
        if lanes not in (None, 1):
            bench.record(
                Figure(
                    bench.name,
                    f"{names[lanes]}, throughput vs 1 lane{target}",
                    "msgs/s",
                    rates[lanes],
                    rates[1],
                )
            )
        bench.record(
            Figure(
                bench.name,
                f"{names[lanes]}, p50 produce -> done at {RATE} msgs/s",
                "ms",
                p50[lanes],
                higher_is_better=False,
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"{names[lanes]}, p99 produce -> done at {RATE} msgs/s",
                "ms",
                p99[lanes],
                higher_is_better=False,
            )
        )
    bench.report()


if __name__ == "__main__":
    main()
