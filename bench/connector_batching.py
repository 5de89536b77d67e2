"""The seed's connector measurements: in-connector latency and throughput of a sink at a
steady rate, with batching intervals of 0, 20 and 100 ms, and with 1, 64 and about 1,000 lanes
(the seed's connector ran 1,000 threads), beside a bare confluent-kafka loop in the same run.

Every variant has a topic of its own (1 partition), fed by a producer in a process of its own
(``_steady_producer.py``) at ``--rate`` msgs/s (2,400: the seed's load) over ``--keys`` keys
(1,000, so that about 1,000 lanes have work), for ``--seconds`` after an unmeasured warm-up of
``--warm-up`` seconds at the same rate. The sink stands for an external system: each
``deliver()`` (one lane's batch, one request) waits ``--io-ms`` (1 ms) of I/O. Per variant:
in-connector latency, polled -> acknowledged by the sink (``app.latency``'s ``poll→end``), p50
and p99; and throughput, the measured records over the time from the first sent to the last
acknowledged (at a rate the connector keeps up with, the rate itself; below it, it fell
behind). Variants (ordering "key" throughout):
  - batching: ``batch_interval`` 0, 20 and 100 ms, at ``--batch-lanes`` (64) lanes;
  - lanes: 1, 64 and ``--many-lanes`` (1,000) lanes, no batch interval, a worker thread per
    lane (``App(concurrency=lanes)``: a blocking sink needs a thread per request in flight,
    as the seed's 1,000 threads); lanes are not capped in Conveyor, so 1,000 are 1,000;
  - the same 1,000 lanes with an ``async def deliver`` sink: the lanes' requests wait side by
    side on the app's event loop, with no thread per lane (the app has as many workers as
    cores).
The baseline: one bare confluent-kafka thread that takes what librdkafka holds (block for the
first message, then up to 499 more without waiting), makes one request of ``--io-ms`` for it,
and times each message from its poll to the request's end; ``fetch.queue.backoff.ms=10`` on
both sides. ``--quick`` runs 64 lanes with no interval, 1,000 async lanes and the bare loop,
1 s each after a 0.5 s warm-up, once: it checks the script.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer as BareConsumer
from rich.table import Table

from conveyor import App
from harness import Bench, Figure, percentile

HERE = Path(__file__).parent
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


class Acknowledged:
    """How many records the sink acknowledged, and when the last of them was."""

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0
        self._lock = threading.Lock()
        self.reached = threading.Event()
        self.target = 0

    def add(self, records: int) -> None:
        with self._lock:
            self.count += records
            self.last = time.perf_counter()
            if self.target and self.count >= self.target:
                self.reached.set()

    def expect(self, target: int) -> None:
        """Forget what was counted; :attr:`reached` is set once ``target`` more came."""
        with self._lock:
            self.count, self.target = 0, target
            self.reached.clear()


class WaitingSink:
    """A blocking sink: each batch is one request of ``io`` seconds (a sleep)."""

    def __init__(self, io: float, acknowledged: Acknowledged) -> None:
        self.io, self.acknowledged = io, acknowledged

    def open(self) -> None: ...

    def deliver(self, records: Sequence[Any]) -> None:
        time.sleep(self.io)  # the external system's answer: nothing here to wait on
        self.acknowledged.add(len(records))

    def flush(self) -> None: ...

    def close(self) -> None: ...


class AsyncWaitingSink:
    """The same request, awaited: the lanes' requests wait side by side on the event loop."""

    def __init__(self, io: float, acknowledged: Acknowledged) -> None:
        self.io, self.acknowledged = io, acknowledged

    async def open(self) -> None: ...

    async def deliver(self, records: Sequence[Any]) -> None:
        await asyncio.sleep(self.io)
        self.acknowledged.add(len(records))

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


def send_steadily(bench: Bench, topic: str, seconds: float, first: int = 0) -> int:
    """``--rate`` msgs/s over ``--keys`` keys for ``seconds``, from a process of its own,
    numbered from message ``first``; returns how many were sent."""
    done = subprocess.run(
        [sys.executable, str(HERE / "_steady_producer.py"), bench.bootstrap, topic, str(seconds),
         str(bench.args.rate), str(bench.args.keys), str(first)],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    )  # fmt: skip
    return int(done.stdout)


def run_connector(
    bench: Bench, lanes: int, interval: float, asynchronous: bool
) -> tuple[float, float, float]:
    """In-connector p50 and p99 (ms) and throughput (msgs/s) of one sink route."""
    args = bench.args
    topic = bench.create_topic()
    acknowledged = Acknowledged()
    io = args.io_ms / 1000
    sink = AsyncWaitingSink(io, acknowledged) if asynchronous else WaitingSink(io, acknowledged)
    threads = (os.cpu_count() or 2) if asynchronous else lanes  # a thread per request in flight
    app = App(
        client_id="bench-connector-batching",
        kafka={
            "bootstrap.servers": bench.bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        },
        concurrency=threads,
        max_wait_time=0.5,
    )
    app.routes.sink(topic, sink, lanes=lanes, ordering="key", batch_interval=interval)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
    app.latency.enable(stamp=False)
    app.start()
    try:
        if not assigned.wait(60):
            raise RuntimeError("no partition assigned")
        warm = send_steadily(bench, topic, args.warm_up)
        time.sleep(0.5)  # the last of the warm-up on its way (100 ms batches too)
        app.latency.reset()
        acknowledged.expect(int(args.seconds * args.rate))
        started = time.perf_counter()
        count = send_steadily(bench, topic, args.seconds, warm)
        if not acknowledged.reached.wait(120):
            raise RuntimeError(f"the sink acknowledged {acknowledged.count} of {count}")
        histogram = app.latency.histogram(topic, "poll→end")
    finally:
        app.stop_and_wait()
    rate = acknowledged.count / (acknowledged.last - started)
    return histogram.quantile(0.5) * 1000, histogram.quantile(0.99) * 1000, rate


def run_bare(bench: Bench) -> tuple[float, float, float]:
    """One bare thread: poll what librdkafka holds, one request per poll, time each message."""
    args = bench.args
    topic = bench.create_topic()
    io = args.io_ms / 1000
    consumer = BareConsumer(
        {
            "bootstrap.servers": bench.bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            **LIKE_FOR_LIKE,
        }
    )
    assigned = threading.Event()
    consumer.subscribe([topic], on_assign=lambda _consumer, _partitions: assigned.set())
    samples: list[float] = []
    acknowledged = Acknowledged()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            batch = consumer.consume(num_messages=1, timeout=0.1)
            if batch:
                batch += consumer.consume(num_messages=499, timeout=0)
            batch = [message for message in batch if message.error() is None]
            if not batch:
                continue
            polled = time.perf_counter()
            time.sleep(io)  # the same request as the sinks'
            done = time.perf_counter()
            samples.extend([(done - polled) * 1000] * len(batch))
            acknowledged.add(len(batch))

    reader = threading.Thread(target=loop, daemon=True)
    reader.start()
    try:
        if not assigned.wait(60):
            raise RuntimeError("no partition assigned")
        warm = send_steadily(bench, topic, args.warm_up)
        time.sleep(0.5)
        acknowledged.expect(int(args.seconds * args.rate))
        samples.clear()
        started = time.perf_counter()
        count = send_steadily(bench, topic, args.seconds, warm)
        if not acknowledged.reached.wait(120):
            raise RuntimeError(f"the bare loop acknowledged {acknowledged.count} of {count}")
        measured = list(samples)
    finally:
        stop.set()
        reader.join(10)
        consumer.close()
    rate = acknowledged.count / (acknowledged.last - started)
    return percentile(measured, 0.5), percentile(measured, 0.99), rate


def arguments(parser: Any) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds a run")
    parser.add_argument("--warm-up", type=float, default=2.0, help="unmeasured seconds first")
    parser.add_argument("--rate", type=int, default=2_400, help="msgs/s sent")
    parser.add_argument("--keys", type=int, default=1_000, help="distinct keys")
    parser.add_argument("--io-ms", type=float, default=1.0, help="the sink's wait per batch")
    parser.add_argument("--batch-lanes", type=int, default=64, help="lanes of the batching runs")
    parser.add_argument("--many-lanes", type=int, default=1_000, help="the ~1,000-way runs")
    parser.add_argument(
        "--quick", action="store_true", help="3 variants, 1 s each, once: checks the script"
    )


def main() -> None:
    bench = Bench("connector_batching", __doc__ or "", arguments)
    args = bench.args
    if args.quick:
        args.seconds, args.warm_up = 1.0, 0.5
        bench.repeats = 1
    batch, many = args.batch_lanes, args.many_lanes
    variants: dict[str, Callable[[], tuple[float, float, float]]] = {
        "bare confluent-kafka loop, 1 thread": lambda: run_bare(bench),
        f"{batch} lanes, no batch interval": lambda: run_connector(bench, batch, 0.0, False),
        f"{batch} lanes, 20 ms batches": lambda: run_connector(bench, batch, 0.02, False),
        f"{batch} lanes, 100 ms batches": lambda: run_connector(bench, batch, 0.1, False),
        "1 lane, no batch interval": lambda: run_connector(bench, 1, 0.0, False),
        f"{many:,} lanes, a thread each": lambda: run_connector(bench, many, 0.0, False),
        f"{many:,} lanes, async sink": lambda: run_connector(bench, many, 0.0, True),
    }
    if batch != 64:  # the lanes series is 1, 64, ~1,000 whatever the batching runs use
        variants["64 lanes, no batch interval"] = lambda: run_connector(bench, 64, 0.0, False)
    if args.quick:
        keep = ("bare", f"{batch} lanes, no batch", "async")
        variants = {name: run for name, run in variants.items() if any(k in name for k in keep)}
    results: dict[str, dict[str, list[float]]] = {
        name: {"p50": [], "p99": [], "rate": []} for name in variants
    }
    for attempt in range(1, bench.repeats + 1):
        for name, run in variants.items():
            p50, p99, rate = run()
            row = results[name]
            row["p50"].append(p50)
            row["p99"].append(p99)
            row["rate"].append(rate)
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: in-connector p50 {p50:.2f} ms, "
                f"p99 {p99:.2f} ms, {rate:,.0f} msgs/s",
                highlight=False,
            )
    bare = results["bare confluent-kafka loop, 1 thread"]
    note = f"{args.rate:,} msgs/s over {args.keys:,} keys, {args.io_ms:g} ms per request"
    for name, row in results.items():
        baseline = not name.startswith("bare")
        for key, label, unit, higher in (
            ("p50", "in-connector p50", "ms", False),
            ("p99", "in-connector p99", "ms", False),
            ("rate", "throughput", "msgs/s", True),
        ):
            bench.record(
                Figure(bench.name, f"{name}: {label}", unit, row[key],
                       bare[key] if baseline else [], higher_is_better=higher, note=note)
            )  # fmt: skip
    bench.report()
    print_table(bench, results)


def print_table(bench: Bench, results: dict[str, dict[str, list[float]]]) -> None:
    """One row per variant: its medians, and the bare loop's ratio beside the latencies."""
    table = Table(
        title="connector_batching — in-connector latency and throughput, medians",
        title_justify="left",
    )
    for column in ("variant", "p50", "p99", "throughput", "p50 / bare"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    bare = statistics.median(results["bare confluent-kafka loop, 1 thread"]["p50"])
    for name, row in results.items():
        p50 = statistics.median(row["p50"])
        table.add_row(
            name,
            f"{p50:.2f} ms",
            f"{statistics.median(row['p99']):.2f} ms",
            f"{statistics.median(row['rate']):,.0f} msgs/s",
            f"{p50 / bare:.2f}x" if bare else "-",
        )
    bench.console.print(table)


if __name__ == "__main__":
    main()
