"""Throughput with 1-5 topics x 1-5 worker threads (the seed's matrix): a no-op consumer app
with ``App(concurrency=M)`` reading N topics, beside one bare confluent-kafka loop subscribed
to the same N topics.

Every cell (N topics, M threads) has its own N topics (1 partition each, ``--partitions``),
and so does the bare loop of each N; all are filled once with ``--messages`` 100-byte
messages spread evenly over the cell's topics, and every run reads them from the start under
a new consumer group. The app reads its topics with one listener (``max_listeners=1``: one
librdkafka consumer, as the bare loop and as Karafka's one subscription group), 500 messages
at most a batch; the bare loop reads ``consume(num_messages=500)``; both with Conveyor's
``fetch.queue.backoff.ms=10``. Throughput is counted the same way on both sides
(harness.RateMeter: from 10 % of the messages to the last, so the group's join is not
counted). Per repeat, each N's bare loop runs first, then its cells, alternately.

The matrix (rows topics, columns threads) shows each cell's median msgs/s and its ratio to
its N's bare loop. ``--topics`` and ``--threads`` pick the rows and columns, ``--cells`` a
list of cells (``1x1,5x5``: topics x threads). ``--quick`` runs 1-2 topics x 1-2 threads,
10,000 messages a cell, once, to check the script. The whole 5 x 5 matrix with the defaults
(300,000 messages a cell, 3 repeats) is 90 runs, each mostly a group's join: a few minutes
(meant to stay under 8 on 2 cores; fewer ``--messages`` or ``--cells`` shorten it).
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Consumer as BareConsumer
from rich.table import Table

from baselines import fill_topic
from conveyor import App, Consumer
from harness import Bench, Figure, RateMeter

PAYLOAD = b"x" * 100
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


def conveyor_run(bootstrap: str, topics: list[str], threads: int, count: int) -> float:
    """msgs/s of a no-op app with ``threads`` workers reading ``topics`` from the start."""
    meter = RateMeter(count)

    class Counting(Consumer):
        def consume(self) -> None:
            meter.add(len(self.messages))

    app = App(
        client_id="bench-topics-threads",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        },
        concurrency=threads,
        max_messages=500,
        max_wait_time=0.5,
        max_listeners=1,
    )
    for topic in topics:
        app.routes.topic(topic, Counting)
    app.start()
    try:
        if not meter.done.wait(180):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
    return meter.rate()


def bare_run(bootstrap: str, topics: list[str], count: int) -> float:
    """msgs/s of one bare batch loop subscribed to ``topics``."""
    consumer = BareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **LIKE_FOR_LIKE,
        }
    )
    consumer.subscribe(topics)
    meter = RateMeter(count)
    deadline = time.monotonic() + 180
    try:
        while not meter.done.is_set() and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=500, timeout=1.0)
            meter.add(sum(1 for message in batch if message.error() is None))
    finally:
        consumer.close()
    return meter.rate()


def parse_cells(args: Any) -> list[tuple[int, int]]:
    if args.cells:
        cells = []
        for cell in args.cells.split(","):
            topics, threads = cell.lower().split("x")
            cells.append((int(topics), int(threads)))
        return cells
    return [
        (int(topics), int(threads))
        for topics in args.topics.split(",")
        for threads in args.threads.split(",")
    ]


def arguments(parser: Any) -> None:
    parser.add_argument(
        "--messages", type=int, default=300_000, help="messages per cell, over all its topics"
    )
    parser.add_argument("--topics", default="1,2,3,4,5", help="topic counts (the rows)")
    parser.add_argument("--threads", default="1,2,3,4,5", help="worker threads (the columns)")
    parser.add_argument("--cells", help="only these cells, TOPICSxTHREADS, e.g. 1x1,5x5")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per topic")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1-2 topics x 1-2 threads, 10,000 messages a cell, one run: checks the script",
    )


def main() -> None:
    bench = Bench("topics_threads", __doc__ or "", arguments)
    args = bench.args
    if args.quick:
        args.messages, args.topics, args.threads, args.cells = 10_000, "1,2", "1,2", None
        bench.repeats = 1
    cells = parse_cells(args)
    counts = sorted({topics for topics, _ in cells})
    topics_of: dict[tuple[int, int], list[str]] = {}  # (N, M) -> topics; M 0: the bare loop
    for n, m in [(n, 0) for n in counts] + cells:
        topics_of[(n, m)] = [bench.create_topic(partitions=args.partitions) for _ in range(n)]
        for topic in topics_of[(n, m)]:
            fill_topic(bench.bootstrap, topic, args.messages // n, PAYLOAD, args.partitions)
    bench.console.print(
        f"filled {sum(len(t) for t in topics_of.values())} topics for {len(cells)} cells"
    )
    runs: dict[tuple[int, int], list[float]] = {key: [] for key in topics_of}
    for attempt in range(1, bench.repeats + 1):
        for n in counts:
            total = args.messages // n * n
            runs[(n, 0)].append(bare_run(bench.bootstrap, topics_of[(n, 0)], total))
            line = [f"bare {runs[(n, 0)][-1]:,.0f}"]
            for m in sorted(m for topics, m in cells if topics == n):
                runs[(n, m)].append(conveyor_run(bench.bootstrap, topics_of[(n, m)], m, total))
                line.append(f"{m} thread(s) {runs[(n, m)][-1]:,.0f}")
            bench.console.print(
                f"  {n} topic(s) run {attempt}/{bench.repeats}: {', '.join(line)} msgs/s"
            )
    for n in counts:
        note = f"{args.messages // n * n:,} x 100 B over {n} topic(s)"
        bench.record(
            Figure(bench.name, f"{n} topic(s): bare loop (baseline)", "msgs/s", runs[(n, 0)],
                   note=note)
        )  # fmt: skip
        for topics, m in cells:
            if topics == n:
                bench.record(
                    Figure(bench.name, f"{n} topic(s) x {m} thread(s)", "msgs/s", runs[(n, m)],
                           runs[(n, 0)], note=note)
                )  # fmt: skip
    bench.report()
    print_matrix(bench, runs, counts, sorted({m for _, m in cells}))


def print_matrix(
    bench: Bench, runs: dict[tuple[int, int], list[float]], counts: list[int], threads: list[int]
) -> None:
    """Rows topics, columns threads: each cell's median msgs/s and its ratio to the bare loop."""
    table = Table(
        title="topics_threads — Conveyor msgs/s · ratio to the bare loop of as many topics",
        title_justify="left",
    )
    table.add_column("topics", justify="right")
    for m in threads:
        table.add_column(f"{m} thread(s)", justify="right")
    table.add_column("bare loop", justify="right")
    for n in counts:
        bare = statistics.median(runs[(n, 0)])
        cells = []
        for m in threads:
            if not runs.get((n, m)):
                cells.append("-")
                continue
            ours = statistics.median(runs[(n, m)])
            cells.append(f"{ours:,.0f} · {ours / bare:.2f}x")
        table.add_row(str(n), *cells, f"{bare:,.0f}")
    bench.console.print(table)


if __name__ == "__main__":
    main()
