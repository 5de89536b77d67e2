"""Wall and CPU time per 1,000 produce_sync calls, and the time each wait wastes, beside bare
confluent-kafka waits that sleep (the seed's measurements: a synchronous produce that waits on
a condition woken by the delivery callback, instead of sleeping and checking again, wasted
0.07 ms per wait instead of 94 ms, and was "up to 40 % faster with 10 % less CPU").

Each variant makes ``--calls`` sequential calls (one 100-byte message, its delivery waited
for) on a topic of its own, after one unmeasured call that connects; the clock is
``time.perf_counter()`` and the CPU is ``time.process_time()``, the whole process's CPU
(every thread: the caller, librdkafka's threads, any poller thread). Reported per 1,000
calls: wall ms and CPU ms. Every side has Conveyor's librdkafka settings
(``conveyor.producer.KAFKA_DEFAULTS``), and each one's clients are closed before the next
variant runs, so that idle clients do not add to its CPU. Variants:
  - Conveyor: ``producer.produce_sync(...)`` (its waiting thread is woken by the report);
  - bare poll-and-sleep: produce, then ``while not done: producer.poll(0);
    time.sleep(0.0001)`` (the caller serves its own reports, sleeping 0.1 ms between looks);
  - bare recheck (the seed's shape, rdkafka-ruby before 0.16): a poller thread serves the
    reports (``poll(0.1)``) and the caller sleeps ``--recheck-ms`` (10 ms, the recheck
    interval rdkafka-ruby's issue #390 describes) between looks at its handle; it is slow, so
    it makes ``--recheck-calls`` calls and is scaled to 1,000;
  - bare flush: produce, then ``flush()``.
The ratios are Conveyor's over each bare side (below 1: faster, less CPU), with the seed's
claim beside them.

The wasted time per wait: the time from the delivery callback to the waiting caller running
again (``time.perf_counter()`` taken first thing in the callback, and again when the caller's
wait returns), median and mean over ``--wasted-calls`` calls, for ``produce_sync`` (the stamp
is taken by wrapping the delivery handle's callback, which costs well under a microsecond) and
for the seed's two sleep-and-recheck waits: 100 ms (rdkafka-ruby's before 0.16) and 10 ms
(WaterDrop's), each caller sleeping first and then looking, as theirs did. ``--quick`` makes
20 calls (3 of the recheck loop, 3 of each wasted-time wait), once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from statistics import median
from typing import Any

from confluent_kafka import Producer as BareProducer

from conveyor import Producer
from conveyor.driver.handles import DeliveryHandle
from conveyor.producer import KAFKA_DEFAULTS
from harness import Bench, Figure

PAYLOAD = b"x" * 100
SEED_CLAIM = "the seed: up to 40 % faster, 10 % less CPU than its sleep loop"
SEED_WASTED = "the seed: 94 ms wasted per wait (100 ms recheck) -> 0.07 ms (condition variable)"
RECHECKS_MS = (100.0, 10.0)  # rdkafka-ruby's sleep before 0.16, and WaterDrop's
Timing = tuple[float, float]  # (wall ms, CPU ms) per 1,000 calls


def timed(call: Callable[[], object], count: int) -> Timing:
    """``count`` calls of ``call``; wall and process CPU ms per 1,000 of them."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        call()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / count * 1e6, cpu / count * 1e6


def bare_producer(bootstrap: str) -> BareProducer:
    return BareProducer({**KAFKA_DEFAULTS, "bootstrap.servers": bootstrap})


def close(producer: BareProducer) -> None:
    producer.flush(10)
    producer.close()  # its librdkafka threads stop here, not at some later collection


def conveyor(bootstrap: str, topic: str, count: int) -> Timing:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_sync(topic=topic, payload=PAYLOAD)  # connect before measuring
        return timed(lambda: producer.produce_sync(topic=topic, payload=PAYLOAD), count)


def poll_and_sleep(bootstrap: str, topic: str, count: int) -> Timing:
    producer = bare_producer(bootstrap)
    produce, poll = producer.produce, producer.poll

    def call() -> None:
        done: list[Any] = []
        produce(topic, PAYLOAD, on_delivery=lambda error, _message: done.append(error))
        while not done:  # the sleep loop itself, measured on purpose
            poll(0)
            time.sleep(0.0001)
        if done[0] is not None:
            raise RuntimeError(f"bare produce failed: {done[0]}")

    try:
        call()
        return timed(call, count)
    finally:
        close(producer)


@contextmanager
def served(bootstrap: str) -> Iterator[BareProducer]:
    """A bare producer whose reports a poller thread serves (rdkafka-ruby's and WaterDrop's
    shape); closed on the way out."""
    producer = bare_producer(bootstrap)
    running = True

    def serve() -> None:
        while running:
            producer.poll(0.1)

    poller = threading.Thread(target=serve, daemon=True)
    poller.start()
    try:
        yield producer
    finally:
        running = False
        poller.join()
        close(producer)


def recheck(bootstrap: str, topic: str, count: int, interval: float) -> Timing:
    """A poller thread serves the reports; the caller sleeps ``interval`` between looks."""
    with served(bootstrap) as producer:
        recheck_call(producer, topic, interval)  # connect before measuring
        return timed(lambda: recheck_call(producer, topic, interval), count)


def recheck_call(producer: BareProducer, topic: str, interval: float) -> float:
    """One call of the seed's old wait; ms from the delivery callback to the caller waking."""
    done: list[tuple[Any, float]] = []
    producer.produce(
        topic,
        PAYLOAD,
        on_delivery=lambda error, _message: done.append((error, time.perf_counter())),
    )
    while not done:  # the seed's old wait: sleep, then look again
        time.sleep(interval)
    woke = time.perf_counter()
    if done[0][0] is not None:
        raise RuntimeError(f"bare produce failed: {done[0][0]}")
    return (woke - done[0][1]) * 1000


def flush(bootstrap: str, topic: str, count: int) -> Timing:
    producer = bare_producer(bootstrap)

    def call() -> None:
        producer.produce(topic, PAYLOAD)
        if producer.flush(30):
            raise RuntimeError("bare flush produce failed")

    try:
        call()
        return timed(call, count)
    finally:
        close(producer)


def conveyor_wasted(bootstrap: str, topic: str, count: int) -> list[float]:
    """ms from each delivery callback to its ``produce_sync`` returning, ``count`` calls."""
    stamps: list[float] = []
    original = DeliveryHandle.__call__

    def stamped(self: DeliveryHandle, error: Any, message: Any) -> None:
        stamps.append(time.perf_counter())
        original(self, error, message)

    DeliveryHandle.__call__ = stamped  # type: ignore[method-assign]
    try:
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            producer.produce_sync(topic=topic, payload=PAYLOAD)  # connect before measuring
            wasted = []
            for _ in range(count):
                stamps.clear()
                producer.produce_sync(topic=topic, payload=PAYLOAD)
                woke = time.perf_counter()
                wasted.append((woke - stamps[-1]) * 1000)
            return wasted
    finally:
        DeliveryHandle.__call__ = original  # type: ignore[method-assign]


def recheck_wasted(bootstrap: str, topic: str, count: int, interval: float) -> list[float]:
    """The same for a caller that sleeps ``interval`` and looks again (a poller thread serves
    the reports, as rdkafka-ruby's did)."""
    with served(bootstrap) as producer:
        recheck_call(producer, topic, interval)  # connect before measuring
        return [recheck_call(producer, topic, interval) for _ in range(count)]


def arguments(parser: Any) -> None:
    parser.add_argument("--calls", type=int, default=1_000, help="sequential calls per run")
    parser.add_argument(
        "--recheck-calls", type=int, default=200, help="calls of the slow recheck loop per run"
    )
    parser.add_argument(
        "--recheck-ms", type=float, default=10.0, help="the recheck loop's sleep between looks"
    )
    parser.add_argument(
        "--wasted-calls",
        type=int,
        default=50,
        help="calls per wasted-time wait (the 100 ms recheck takes 0.1 s each)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="20 calls (3 of the slow waits), one run"
    )


def main() -> None:
    bench = Bench("produce_sync_cpu", __doc__ or "", arguments)
    args = bench.args
    if args.quick:
        args.calls, args.recheck_calls, args.wasted_calls = 20, 3, 3
        bench.repeats = 1
    names = ("conveyor", "poll-and-sleep", "recheck", "flush")
    topics = {name: bench.create_topic(partitions=1) for name in names}  # one per variant
    interval = args.recheck_ms / 1000
    variants: dict[str, Callable[[], Timing]] = {
        "poll-and-sleep": lambda: poll_and_sleep(
            bench.bootstrap, topics["poll-and-sleep"], args.calls
        ),
        "conveyor": lambda: conveyor(bench.bootstrap, topics["conveyor"], args.calls),
        "flush": lambda: flush(bench.bootstrap, topics["flush"], args.calls),
        "recheck": lambda: recheck(
            bench.bootstrap, topics["recheck"], args.recheck_calls, interval
        ),
    }
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for attempt in range(1, bench.repeats + 1):
        for name, run in variants.items():
            per_wall, per_cpu = run()
            wall[name].append(per_wall)
            cpu[name].append(per_cpu)
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: {per_wall:,.1f} ms wall, "
                f"{per_cpu:,.1f} ms CPU per 1,000 calls",
                highlight=False,
            )
    labels = {
        "poll-and-sleep": "bare poll(0) + sleep 0.1 ms",
        "recheck": f"bare poller thread + {args.recheck_ms:g} ms recheck (the seed's shape)",
        "flush": "bare flush()",
    }
    note = f"per 1,000 calls; {args.calls:,} calls a run"
    for name, label in labels.items():
        bench.record(
            Figure(bench.name, f"{label}: wall", "ms", wall[name], higher_is_better=False,
                   note=note if name != "recheck" else f"{args.recheck_calls} calls, scaled")
        )  # fmt: skip
        bench.record(
            Figure(bench.name, f"{label}: CPU", "ms", cpu[name], higher_is_better=False, note=note)
        )
    for name, label in labels.items():
        claim = SEED_CLAIM if name != "flush" else "like-for-like: no sleep on either side"
        bench.record(
            Figure(bench.name, f"produce_sync wall vs {label}", "ms", wall["conveyor"],
                   wall[name], higher_is_better=False, note=claim)
        )  # fmt: skip
        bench.record(
            Figure(bench.name, f"produce_sync CPU vs {label}", "ms", cpu["conveyor"],
                   cpu[name], higher_is_better=False, note=claim)
        )  # fmt: skip
    record_wasted(bench, args.wasted_calls)
    bench.report()
    print_summary(bench, wall, cpu, labels)


def record_wasted(bench: Bench, count: int) -> None:
    """The wasted time per wait: produce_sync (``20 * count`` calls: they are quick) against
    the seed's two rechecks (``count`` each), each on a topic of its own; each run's median
    and mean printed, the medians reported."""
    ours = bench.create_topic(partitions=1)
    waits: dict[str, Callable[[], list[float]]] = {
        "produce_sync": lambda: conveyor_wasted(bench.bootstrap, ours, count * 20)
    }
    for ms in RECHECKS_MS:
        theirs = bench.create_topic(partitions=1)
        waits[f"{ms:g} ms recheck"] = lambda ms=ms, topic=theirs: recheck_wasted(
            bench.bootstrap, topic, count, ms / 1000
        )
    medians: dict[str, list[float]] = {name: [] for name in waits}
    for attempt in range(1, bench.repeats + 1):
        for name, run in waits.items():
            samples = run()
            medians[name].append(median(samples))
            bench.console.print(
                f"  wasted per wait, {name} run {attempt}/{bench.repeats}: median "
                f"{median(samples):.3f} ms, mean {sum(samples) / len(samples):.3f} ms "
                f"({len(samples)} waits)",
                highlight=False,
            )
    labels = {"100 ms recheck": "rdkafka-ruby's, before 0.16", "10 ms recheck": "WaterDrop's"}
    for name, whose in labels.items():
        bench.record(
            Figure(bench.name, f"wasted per wait: produce_sync vs a {name} ({whose})", "ms",
                   medians["produce_sync"], medians[name], higher_is_better=False,
                   note=SEED_WASTED)
        )  # fmt: skip


def print_summary(
    bench: Bench,
    wall: dict[str, list[float]],
    cpu: dict[str, list[float]],
    labels: dict[str, str],
) -> None:
    """One line per bare side: how much faster and how much less CPU produce_sync is."""
    ours_wall, ours_cpu = median(wall["conveyor"]), median(cpu["conveyor"])
    bench.console.print(
        f"produce_sync: {ours_wall:,.1f} ms wall, {ours_cpu:,.1f} ms CPU per 1,000 calls "
        f"({SEED_CLAIM})",
        highlight=False,
    )
    for name, label in labels.items():
        their_wall, their_cpu = median(wall[name]), median(cpu[name])
        bench.console.print(
            f"  vs {label}: {1 - ours_wall / their_wall:+.0%} faster, "
            f"{1 - ours_cpu / their_cpu:+.0%} less CPU",
            highlight=False,
        )


if __name__ == "__main__":
    main()
