"""The sink connector's tasks sweep (Kafka Connect's ``tasks.max``): 1, 2, 4 and 8 tasks over a
multi-partition topic, beside the thread-pool (lanes) sweep of ``connector_batching.py``.

In Kafka Connect a task is a consumer of the connector's group with its own thread; here a task
is a Conveyor app of its own (its own listener and librdkafka consumer) in one consumer group,
all in one process as Connect's tasks share a worker's JVM. The parallelism is the same in every
variant: ``--lanes`` (64) lanes in all, split evenly over the tasks (a thread per lane, as a
blocking sink needs), so that what changes is how many consumers share the partitions.

The topic has ``--partitions`` (8) partitions and a variant of its own, fed by a producer in a
process of its own (``_steady_producer.py``) at ``--rate`` msgs/s (2,400) over ``--keys`` keys
(1,000), each message carrying its key's sequence number and its send time. The sink waits
``--io-ms`` (1 ms) per batch, the request to an external system. Per variant: end-to-end
latency (sent -> acknowledged by the sink, one clock: producer and connector share the
machine), p50 and p99; throughput over the measured stretch; and per-key order: every record
of a key must arrive after the one before it (``out of order`` counts any that did not; a
record seen twice, at-least-once after a rebalance, is counted as ``again``, not as a loss of
order). The measurement starts once every partition is assigned and a warm-up went through.

The baseline: one bare confluent-kafka thread over the same kind of topic (take what librdkafka
holds, one request for it), timed the same way, ``fetch.queue.backoff.ms=10`` on both sides.
``--quick`` runs 1 and 2 tasks and the bare loop, 1 s each after a 1 s warm-up, once.

The seed's half of the finding: one task is fastest (more tasks add consumers, group
coordination and fetch sessions, not delivery parallelism, which the lanes give).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer as BareConsumer
from rich.table import Table

from connector_batching import Acknowledged, send_steadily
from conveyor import App
from harness import Bench, Figure, percentile

LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


class Observed:
    """What the sinks saw: e2e latencies, and per-key order, across every task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latencies: list[float] = []
        self.last: dict[bytes, int] = {}
        self.out_of_order = 0
        self.again = 0
        self.acknowledged = Acknowledged()

    def record(self, records: Sequence[tuple[bytes, int, float]]) -> None:
        now = time.time()
        with self._lock:
            for key, seq, sent in records:
                self.latencies.append((now - sent) * 1000)
                last = self.last.get(key, -1)
                if seq == last:
                    self.again += 1
                elif seq < last:
                    self.out_of_order += 1
                else:
                    self.last[key] = seq
        self.acknowledged.add(len(records))

    def reset(self) -> None:
        with self._lock:
            self.latencies.clear()


def decoded(records: Sequence[Any]) -> list[tuple[bytes, int, float]]:
    out = []
    for record in records:
        body = json.loads(record.raw_payload)
        out.append((record.raw_key, body["seq"], body["sent"]))
    return out


class WaitingSink:
    """A blocking sink: each batch is one request of ``io`` seconds (a sleep)."""

    def __init__(self, io: float, observed: Observed) -> None:
        self.io, self.observed = io, observed

    def open(self) -> None: ...

    def deliver(self, records: Sequence[Any]) -> None:
        time.sleep(self.io)  # the external system's answer: nothing here to wait on
        self.observed.record(decoded(records))

    def flush(self) -> None: ...

    def close(self) -> None: ...


Result = tuple[float, float, float, int, int]  # p50 ms, p99 ms, msgs/s, out of order, again


def measure(bench: Bench, topic: str, observed: Observed) -> tuple[float, int]:
    """Warm up, then send the measured stretch; when it started, and how many were sent."""
    args = bench.args
    warm = send_steadily(bench, topic, args.warm_up)
    time.sleep(0.5)  # the last of the warm-up on its way
    observed.reset()
    observed.acknowledged.expect(int(args.seconds * args.rate))
    started = time.perf_counter()
    count = send_steadily(bench, topic, args.seconds, warm)
    if not observed.acknowledged.reached.wait(120):
        raise RuntimeError(f"the sinks acknowledged {observed.acknowledged.count} of {count}")
    return started, count


def result(observed: Observed, started: float) -> Result:
    latencies = list(observed.latencies)
    acknowledged = observed.acknowledged
    rate = acknowledged.count / (acknowledged.last - started)
    return (
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        rate,
        observed.out_of_order,
        observed.again,
    )


def run_tasks(bench: Bench, tasks: int) -> Result:
    """``tasks`` apps in one group, ``--lanes`` lanes split over them."""
    args = bench.args
    topic = bench.create_topic(partitions=args.partitions)
    observed = Observed()
    lanes = max(1, args.lanes // tasks)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    owned: dict[int, set[tuple[str, int]]] = {index: set() for index in range(tasks)}
    settled = threading.Condition()

    def follow(index: int) -> tuple[Callable[[Any], None], Callable[[Any], None]]:
        def assigned(event: Any) -> None:
            with settled:
                owned[index].update(event["partitions"])
                settled.notify_all()

        def revoked(event: Any) -> None:
            with settled:
                owned[index].difference_update(event["partitions"])
                settled.notify_all()

        return assigned, revoked

    apps = []
    for index in range(tasks):
        app = App(
            client_id=f"bench-connector-task-{index}",
            kafka={
                "bootstrap.servers": bench.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
            },
            concurrency=lanes,
            max_wait_time=0.5,
        )
        app.routes.sink(
            topic, WaitingSink(args.io_ms / 1000, observed), lanes=lanes, ordering="key"
        )
        on_assigned, on_revoked = follow(index)
        app.monitor.subscribe("rebalance.partitions_assigned", on_assigned)
        app.monitor.subscribe("rebalance.partitions_revoked", on_revoked)
        apps.append(app)
    for app in apps:
        app.start()
    try:
        with settled:
            every = {(topic, partition) for partition in range(args.partitions)}
            if not settled.wait_for(
                lambda: (
                    set().union(*owned.values()) == every
                    and sum(len(partitions) for partitions in owned.values()) == len(every)
                    and all(owned.values())
                ),
                timeout=120,
            ):
                raise RuntimeError(f"the group did not settle: {owned}")
        started, _count = measure(bench, topic, observed)
        return result(observed, started)
    finally:
        for app in apps:
            app.stop()
        for app in apps:
            app.stop_and_wait()


def run_bare(bench: Bench) -> Result:
    """One bare thread: poll what librdkafka holds, one request per poll."""
    args = bench.args
    topic = bench.create_topic(partitions=args.partitions)
    observed = Observed()
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
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            batch = consumer.consume(num_messages=1, timeout=0.1)
            if batch:
                batch += consumer.consume(num_messages=499, timeout=0)
            records = []
            for message in batch:
                if message.error() is None:
                    body = json.loads(message.value())
                    records.append((message.key(), body["seq"], body["sent"]))
            if records:
                time.sleep(io)  # the same request as the sinks'
                observed.record(records)

    reader = threading.Thread(target=loop, daemon=True)
    reader.start()
    try:
        if not assigned.wait(60):
            raise RuntimeError("no partition assigned")
        started, _count = measure(bench, topic, observed)
        return result(observed, started)
    finally:
        stop.set()
        reader.join(10)
        consumer.close()


def arguments(parser: Any) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds a run")
    parser.add_argument("--warm-up", type=float, default=2.0, help="unmeasured seconds first")
    parser.add_argument("--rate", type=int, default=2_400, help="msgs/s sent")
    parser.add_argument("--keys", type=int, default=1_000, help="distinct keys")
    parser.add_argument("--io-ms", type=float, default=1.0, help="the sink's wait per batch")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of each topic")
    parser.add_argument("--lanes", type=int, default=64, help="lanes in all, over the tasks")
    parser.add_argument("--tasks", default="1,2,4,8", help="task counts, comma-separated")
    parser.add_argument(
        "--quick", action="store_true", help="1 and 2 tasks, 1 s each, once: checks the script"
    )


def main() -> None:
    bench = Bench("connector_tasks", __doc__ or "", arguments)
    args = bench.args
    counts = [int(count) for count in args.tasks.split(",")]
    if args.quick:
        args.seconds, args.warm_up, counts = 1.0, 1.0, [1, 2]
        bench.repeats = 1
    bare_name = "bare confluent-kafka loop, 1 thread"
    variants: dict[str, Callable[[], Result]] = {bare_name: lambda: run_bare(bench)}
    for count in counts:
        lanes = max(1, args.lanes // count)
        name = f"{count} task{'s' if count > 1 else ''} x {lanes} lanes"
        variants[name] = lambda count=count: run_tasks(bench, count)
    rows: dict[str, dict[str, list[float]]] = {
        name: {"p50": [], "p99": [], "rate": [], "out of order": [], "again": []}
        for name in variants
    }
    for attempt in range(1, bench.repeats + 1):
        for name, run in variants.items():
            p50, p99, rate, disorder, again = run()
            row = rows[name]
            for key, value in zip(row, (p50, p99, rate, disorder, again), strict=True):
                row[key].append(value)
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: e2e p50 {p50:.2f} ms, p99 {p99:.2f} "
                f"ms, {rate:,.0f} msgs/s, {disorder} out of order, {again} seen again",
                highlight=False,
            )
    bare = rows[bare_name]
    note = (
        f"{args.rate:,} msgs/s over {args.keys:,} keys, {args.partitions} partitions, "
        f"{args.io_ms:g} ms per request"
    )
    for name, row in rows.items():
        baseline = name != bare_name
        for key, label, unit, higher in (
            ("p50", "e2e p50", "ms", False),
            ("p99", "e2e p99", "ms", False),
            ("rate", "throughput", "msgs/s", True),
        ):
            bench.record(
                Figure(bench.name, f"{name}: {label}", unit, row[key],
                       bare[key] if baseline else [], higher_is_better=higher, note=note)
            )  # fmt: skip
    bench.report()
    print_table(bench, rows, bare_name)
    disorder = sum(sum(row["out of order"]) for row in rows.values())
    if disorder:
        raise SystemExit(f"per-key order broken: {disorder:.0f} records out of order")


def print_table(bench: Bench, rows: dict[str, dict[str, list[float]]], bare_name: str) -> None:
    """One row per variant: medians, the p50 ratio to the bare loop, and per-key order."""
    table = Table(title="connector_tasks — e2e latency, throughput and order, medians")
    for column in ("variant", "p50", "p99", "throughput", "p50 / bare", "out of order"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    bare = statistics.median(rows[bare_name]["p50"])
    for name, row in rows.items():
        p50 = statistics.median(row["p50"])
        table.add_row(
            name,
            f"{p50:.2f} ms",
            f"{statistics.median(row['p99']):.2f} ms",
            f"{statistics.median(row['rate']):,.0f} msgs/s",
            f"{p50 / bare:.2f}x" if bare else "-",
            f"{sum(row['out of order']):.0f} (again: {sum(row['again']):.0f})",
        )
    bench.console.print(table)


if __name__ == "__main__":
    main()
