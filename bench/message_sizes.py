"""Produce and consume throughput across message sizes, 100 B to 1 MB, each beside a bare
confluent-kafka loop with the same librdkafka settings, in the same run.

For each size (``--sizes``, bytes: 100, 1,000, 10,000, 100,000 and 1,000,000 by default) the
run moves about ``--megabytes`` MB (at least 200 and at most ``--messages`` messages), so that
small sizes measure the per-message cost and large ones the per-byte cost. Every variant has a
topic of its own (1 partition, ``max.message.bytes`` 2 MB so that a 1 MB message fits).

- produce: Conveyor's ``produce_async`` (every delivery waited for before the clock stops)
  beside the bare loop with one producer-wide delivery callback, both with Conveyor's
  librdkafka settings (acks=all, idempotence, linger.ms=0) and ``message.max.bytes`` 2 MB,
  each connected (one message delivered) before its clock starts;
- consume: a Conveyor consumer that touches ``len(self.messages)`` beside the bare
  ``consume(num_messages=500)`` loop (both take at most 500 messages a batch, fewer when a
  size's count is small: a twentieth of it, at least 10), both with ``fetch.queue.backoff.ms=10`` (what Conveyor's
  listener sets); each topic filled once, unmeasured.

Reported per size: msgs/s and MB/s of each side and Conveyor's ratio. ``--quick`` runs 100 B
and 100 KB with a tenth of the volume, once: it checks the script.
"""

from __future__ import annotations

import time
import uuid
from statistics import median
from typing import Any

from confluent_kafka import Producer as BareProducer
from rich.table import Table

from baselines import bare_batch_consume, fill_topic
from baselines import bare_produce as fill_large
from conveyor import App, Consumer, Producer
from conveyor.producer import KAFKA_DEFAULTS
from harness import Bench, Figure, RateMeter

LARGE = 2_000_000  # bytes: room for a 1 MB payload and its record overhead
TOPIC_CONFIG = {"max.message.bytes": str(LARGE)}
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


def count_for(size: int, megabytes: float, most: int) -> int:
    """How many messages of ``size`` bytes make about ``megabytes`` MB (200 to ``most``)."""
    return max(200, min(most, int(megabytes * 1_000_000 / size)))


def conveyor_produce(bootstrap: str, topic: str, count: int, payload: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": LARGE})
    produce_async = producer.produce_async
    try:
        producer.produce_sync(topic=topic, payload=payload)  # connected before the clock
        started = time.perf_counter()
        for _ in range(count):
            produce_async(topic=topic, payload=payload)
        remaining = producer.flush(120)
        elapsed = time.perf_counter() - started
    finally:
        producer.close()
    if remaining:
        raise RuntimeError(f"{remaining} messages undelivered")
    return count / elapsed


def batch_for(count: int) -> int:
    """Messages a batch on both consume sides: 500, fewer for a small count (a handful of
    large messages would otherwise arrive in one batch, leaving no stretch to measure)."""
    return min(500, max(10, count // 20))


def bare_produce(bootstrap: str, topic: str, count: int, payload: bytes) -> float:
    """The bare loop: one producer-wide delivery callback, ``poll(0)`` after each produce,
    the same librdkafka settings, connected (one message delivered) before the clock."""
    failures = 0

    def on_delivery(error: Any, _message: Any) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    producer = BareProducer(
        {**KAFKA_DEFAULTS, "message.max.bytes": LARGE, "bootstrap.servers": bootstrap,
         "on_delivery": on_delivery}
    )  # fmt: skip
    produce, poll = producer.produce, producer.poll
    produce(topic, payload)
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                produce(topic, payload)
                break
            except BufferError:
                poll(0.05)  # the local queue is full: serve deliveries until there is room
        poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"bare produce: {remaining} undelivered, {failures} failed")
    return count / elapsed


def conveyor_consume(bootstrap: str, topic: str, count: int) -> float:
    meter = RateMeter(count)

    class Counting(Consumer):
        def consume(self) -> None:
            meter.add(len(self.messages))

    app = App(
        client_id="bench-sizes",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        },
        concurrency=4,
        max_messages=batch_for(count),
        max_wait_time=0.5,
    )
    app.routes.topic(topic, Counting)
    app.start()
    try:
        if not meter.done.wait(180):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
    return meter.rate()


def fill(bootstrap: str, topic: str, count: int, payload: bytes) -> None:
    if len(payload) < 100_000:
        fill_topic(bootstrap, topic, count, payload)
        return
    # fill_topic batches 1 MB at a time, which a message this large does not fit in
    fill_large(bootstrap, topic, count, payload, config={"message.max.bytes": LARGE})


def arguments(parser: Any) -> None:
    parser.add_argument(
        "--sizes",
        default="100,1000,10000,100000,1000000",
        help="message sizes in bytes, comma-separated",
    )
    parser.add_argument("--megabytes", type=float, default=100.0, help="MB moved per size")
    parser.add_argument("--messages", type=int, default=500_000, help="most messages per size")
    parser.add_argument(
        "--quick", action="store_true", help="100 B and 100 KB, a tenth of the volume, once"
    )


def main() -> None:
    bench = Bench("message_sizes", __doc__ or "", arguments)
    args = bench.args
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.quick:
        sizes, args.megabytes, args.messages = [100, 100_000], 20.0, 20_000
        bench.repeats = 1
    rows: dict[int, dict[str, list[float]]] = {}
    for size in sizes:
        payload = b"x" * size
        count = count_for(size, args.megabytes, args.messages)
        row: dict[str, list[float]] = {
            "produce": [],
            "bare produce": [],
            "consume": [],
            "bare consume": [],
        }
        consume_topics: dict[str, list[str]] = {"consume": [], "bare consume": []}
        for filled in consume_topics.values():
            for _ in range(bench.repeats):  # a fresh filled topic per run: no warm cache
                topic = bench.create_topic(config=TOPIC_CONFIG)
                fill(bench.bootstrap, topic, count, payload)
                filled.append(topic)
        for attempt in range(bench.repeats):
            bare_topic = bench.create_topic(config=TOPIC_CONFIG)
            ours_topic = bench.create_topic(config=TOPIC_CONFIG)
            row["bare produce"].append(bare_produce(bench.bootstrap, bare_topic, count, payload))
            row["produce"].append(conveyor_produce(bench.bootstrap, ours_topic, count, payload))
            row["bare consume"].append(
                bare_batch_consume(
                    bench.bootstrap,
                    consume_topics["bare consume"][attempt],
                    count,
                    batch_size=batch_for(count),
                    config=LIKE_FOR_LIKE,
                )
            )
            row["consume"].append(
                conveyor_consume(bench.bootstrap, consume_topics["consume"][attempt], count)
            )
            bench.console.print(
                f"  {size:,} B run {attempt + 1}/{bench.repeats} ({count:,} messages): "
                + ", ".join(f"{name} {runs[-1]:,.0f}" for name, runs in row.items())
                + " msgs/s",
                highlight=False,
            )
        rows[size] = row
        note = f"{count:,} messages of {size:,} B"
        for side in ("produce", "consume"):
            bench.record(
                Figure(bench.name, f"{side}, {size:,} B", "msgs/s", row[side], row[f"bare {side}"],
                       note=note)
            )  # fmt: skip
    bench.report()
    print_table(bench, rows)


def print_table(bench: Bench, rows: dict[int, dict[str, list[float]]]) -> None:
    """One row per size: msgs/s and MB/s of each side, and Conveyor's ratio."""
    table = Table(title="message_sizes — medians", title_justify="left")
    for column in ("size", "produce", "bare produce", "ratio", "consume", "bare consume", "ratio"):
        table.add_column(column, justify="right")
    for size, row in rows.items():
        cells = [f"{size:,} B"]
        for side in ("produce", "consume"):
            ours, theirs = median(row[side]), median(row[f"bare {side}"])
            cells += [
                f"{ours:,.0f}/s · {ours * size / 1e6:,.1f} MB/s",
                f"{theirs:,.0f}/s · {theirs * size / 1e6:,.1f} MB/s",
                f"{ours / theirs:.2f}x" if theirs else "-",
            ]
        table.add_row(*cells)
    bench.console.print(table)


if __name__ == "__main__":
    main()
