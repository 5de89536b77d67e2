"""Asynchronous produce throughput: Conveyor's produce_async and produce_many_async beside a
bare confluent-kafka loop with one producer-wide delivery callback, in the same run.

Targets: produce_many_async >= 0.9x and produce_async >= 0.6x of the bare loop. All three
use the same librdkafka settings (Conveyor's defaults: acks=all, idempotence, linger.ms=0),
each writes to its own topic, and each waits for every delivery report before the clock stops.
"""

from __future__ import annotations

import time

from baselines import bare_produce
from conveyor import Producer
from conveyor.producer import KAFKA_DEFAULTS
from harness import Bench, Figure

BURST = 1_000


def conveyor_produce_async(bootstrap: str, topic: str, count: int, payload: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap})
    produce_async = producer.produce_async
    started = time.perf_counter()
    for _ in range(count):
        produce_async(topic=topic, payload=payload)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - started
    producer.close()
    if remaining:
        raise RuntimeError(f"{remaining} messages undelivered")
    return count / elapsed


def conveyor_produce_many_async(bootstrap: str, topic: str, count: int, payload: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap})
    burst = [{"topic": topic, "payload": payload} for _ in range(BURST)]
    handles = []
    started = time.perf_counter()
    for _ in range(count // BURST):
        handles.append(producer.produce_many_async(burst))
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - started
    failed = sum(1 for handle in handles if not handle.done())
    producer.close()
    if remaining or failed:
        raise RuntimeError(f"{remaining} messages undelivered, {failed} bursts incomplete")
    return (count // BURST) * BURST / elapsed


def main() -> None:
    bench = Bench(
        "produce_async",
        __doc__ or "",
        lambda parser: parser.add_argument("--messages", type=int, default=1_000_000),
    )
    count: int = bench.args.messages
    payload = b"x" * 100
    topics = {name: bench.create_topic(partitions=1) for name in ("bare", "async", "many")}
    settings = dict(KAFKA_DEFAULTS)
    bare_runs: list[float] = []
    async_runs: list[float] = []
    many_runs: list[float] = []
    for attempt in range(1, bench.repeats + 1):
        for label, runs, run in (
            (
                "bare loop",
                bare_runs,
                lambda: bare_produce(
                    bench.bootstrap, topics["bare"], count, payload, config=settings
                ),
            ),
            (
                "produce_async",
                async_runs,
                lambda: conveyor_produce_async(bench.bootstrap, topics["async"], count, payload),
            ),
            (
                "produce_many_async",
                many_runs,
                lambda: conveyor_produce_many_async(
                    bench.bootstrap, topics["many"], count, payload
                ),
            ),
        ):
            runs.append(run())
            bench.console.print(f"  {label} run {attempt}/{bench.repeats}: {runs[-1]:,.0f} msgs/s")
    note = f"{count:,} x 100 B, 1 partition"
    bench.record(
        Figure(bench.name, "bare confluent-kafka loop (baseline)", "msgs/s", bare_runs, note=note)
    )
    bench.record(
        Figure(
            bench.name,
            "produce_many_async (target >= 0.9x)",
            "msgs/s",
            many_runs,
            bare_runs,
            note=f"bursts of {BURST:,}",
        )
    )
    bench.record(
        Figure(
            bench.name, "produce_async (target >= 0.6x)", "msgs/s", async_runs, bare_runs, note=note
        )
    )
    bench.report()


if __name__ == "__main__":
    main()
