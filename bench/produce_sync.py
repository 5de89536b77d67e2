"""Synchronous produce latency: Conveyor's produce_sync beside three bare confluent-kafka waits.

In the same run, with the same librdkafka settings (Conveyor's defaults):
  - bare Event: a poller thread serves the delivery callback, which sets a threading.Event
    the caller waits on (the floor for a condition-woken wait);
  - bare flush: produce, then flush() per message;
  - bare flush with its report: the same with a delivery callback that keeps the message's
    error, as a caller that must know each message's fate writes it (the like-for-like one:
    produce_sync hands back a report);
  - sleep loop: the caller checks a flag every 10 ms (how WaterDrop used to wait).
Then 8 threads call produce_sync at once, against 8 threads sharing one bare producer and
calling flush() per message.

Targets (issue 3): produce_sync p50 within 10 % (or 0.1 ms) of the faster bare wait; 8
concurrent callers >= 1.3x the calls/s of the shared flush with a lower p50; >= 10x faster
in total than the sleep loop.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer as BareProducer

from conveyor import Producer
from conveyor.producer import KAFKA_DEFAULTS
from harness import Bench, Figure, percentile

THREADS = 8


class _BarePoller:
    """A bare producer with a thread serving its callbacks, as an application would write it."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = BareProducer({**KAFKA_DEFAULTS, "bootstrap.servers": bootstrap})
        self._running = True
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while self._running:
            self.producer.poll(0.1)

    def close(self) -> None:
        self._running = False
        self._thread.join()
        self.producer.flush(10)


def _timed_calls(call: Callable[[], None], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def conveyor_sequential(bootstrap: str, topic: str, count: int, payload: bytes) -> list[float]:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_sync(topic=topic, payload=payload)  # connect before measuring
        return _timed_calls(lambda: producer.produce_sync(topic=topic, payload=payload), count)


def bare_event(bootstrap: str, topic: str, count: int, payload: bytes) -> list[float]:
    bare = _BarePoller(bootstrap)

    def call() -> None:
        delivered = threading.Event()
        failure: list[Any] = []

        def on_delivery(error: Any, _message: Any) -> None:
            if error is not None:
                failure.append(error)
            delivered.set()

        bare.producer.produce(topic, payload, on_delivery=on_delivery)
        if not delivered.wait(30) or failure:
            raise RuntimeError(f"bare event produce failed: {failure}")

    try:
        call()
        return _timed_calls(call, count)
    finally:
        bare.close()


def bare_flush(
    bootstrap: str, topic: str, count: int, payload: bytes, reported: bool = False
) -> list[float]:
    """produce, then flush(); ``reported``: with a delivery callback keeping each error."""
    producer = BareProducer({**KAFKA_DEFAULTS, "bootstrap.servers": bootstrap})
    errors: list[Any] = []

    def keep(error: Any, _message: Any) -> None:
        errors.append(error)

    def call() -> None:
        if reported:
            producer.produce(topic, payload, on_delivery=keep)
        else:
            producer.produce(topic, payload)
        if producer.flush(30) or (reported and errors.pop() is not None):
            raise RuntimeError("bare flush produce failed")

    call()
    return _timed_calls(call, count)


def bare_sleep_loop(bootstrap: str, topic: str, count: int, payload: bytes) -> list[float]:
    bare = _BarePoller(bootstrap)

    def call() -> None:
        done: list[Any] = []
        bare.producer.produce(topic, payload, on_delivery=lambda error, _m: done.append(error))
        while not done:  # the old way, measured here on purpose
            time.sleep(0.01)

    try:
        call()
        return _timed_calls(call, count)
    finally:
        bare.close()


def _concurrent(
    call_factory: Callable[[], Callable[[], None]], seconds: float
) -> tuple[float, list[float]]:
    """Run THREADS threads calling for ``seconds``; return calls/s and all latencies (ms)."""
    latencies: list[list[float]] = [[] for _ in range(THREADS)]
    start = threading.Barrier(THREADS + 1)
    deadline = 0.0

    def worker(index: int) -> None:
        call = call_factory()
        samples = latencies[index]
        start.wait()
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            call()
            samples.append((time.perf_counter() - began) * 1000)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    deadline = time.perf_counter() + seconds + 0.05
    started = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    merged = [sample for samples in latencies for sample in samples]
    return len(merged) / elapsed, merged


def conveyor_concurrent(
    bootstrap: str, topic: str, seconds: float, payload: bytes
) -> tuple[float, list[float]]:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_sync(topic=topic, payload=payload)
        return _concurrent(
            lambda: lambda: producer.produce_sync(topic=topic, payload=payload), seconds
        )


def bare_flush_concurrent(
    bootstrap: str, topic: str, seconds: float, payload: bytes
) -> tuple[float, list[float]]:
    producer = BareProducer({**KAFKA_DEFAULTS, "bootstrap.servers": bootstrap})
    producer.produce(topic, payload)
    producer.flush(30)

    def call() -> None:
        producer.produce(topic, payload)
        producer.flush(30)

    return _concurrent(lambda: call, seconds)


def main() -> None:
    bench = Bench(
        "produce_sync",
        __doc__ or "",
        lambda parser: (
            parser.add_argument("--calls", type=int, default=1_000),
            parser.add_argument("--seconds", type=float, default=10.0, help="per concurrent run"),
            parser.add_argument(
                "--sleep-calls", type=int, default=200, help="calls of the slow sleep loop"
            ),
        ),
    )
    count: int = bench.args.calls
    seconds: float = bench.args.seconds
    payload = b"x" * 100
    names = ("conveyor", "event", "flush", "reported", "sleep", "threads-conveyor", "threads-flush")
    topics = {name: bench.create_topic(partitions=1) for name in names}  # one per variant
    p50s: dict[str, list[float]] = {
        name: [] for name in ("conveyor", "event", "flush", "reported", "sleep")
    }
    p99s: dict[str, list[float]] = {name: [] for name in p50s}
    per_call: dict[str, list[float]] = {name: [] for name in p50s}
    variants = {
        "event": lambda: bare_event(bench.bootstrap, topics["event"], count, payload),
        "flush": lambda: bare_flush(bench.bootstrap, topics["flush"], count, payload),
        "reported": lambda: bare_flush(
            bench.bootstrap, topics["reported"], count, payload, reported=True
        ),
        "conveyor": lambda: conveyor_sequential(
            bench.bootstrap, topics["conveyor"], count, payload
        ),
        "sleep": lambda: bare_sleep_loop(
            bench.bootstrap, topics["sleep"], bench.args.sleep_calls, payload
        ),
    }
    for attempt in range(1, bench.repeats + 1):
        for name, run in variants.items():
            samples = run()
            p50s[name].append(statistics.median(samples))
            p99s[name].append(percentile(samples, 0.99))
            per_call[name].append(statistics.fmean(samples))
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: p50 {p50s[name][-1]:.3f} ms, p99 {p99s[name][-1]:.3f} ms"
            )
    floor = (
        "event" if statistics.median(p50s["event"]) <= statistics.median(p50s["flush"]) else "flush"
    )
    note = f"{count:,} sequential calls"
    bench.record(
        Figure(
            bench.name,
            "bare Event wait p50",
            "ms",
            p50s["event"],
            higher_is_better=False,
            note=note,
        )
    )
    bench.record(
        Figure(
            bench.name, "bare flush() p50", "ms", p50s["flush"], higher_is_better=False, note=note
        )
    )
    bench.record(
        Figure(
            bench.name,
            f"produce_sync p50 (vs bare {floor}; target <= 1.1x)",
            "ms",
            p50s["conveyor"],
            p50s[floor],
            higher_is_better=False,
            note=note,
        )
    )
    bench.record(
        Figure(
            bench.name,
            "produce_sync p50 vs bare flush() with its report (like-for-like)",
            "ms",
            p50s["conveyor"],
            p50s["reported"],
            higher_is_better=False,
            note=note,
        )
    )
    bench.record(
        Figure(
            bench.name,
            f"produce_sync p99 (vs bare {floor})",
            "ms",
            p99s["conveyor"],
            p99s[floor],
            higher_is_better=False,
            note=note,
        )
    )
    bench.record(
        Figure(
            bench.name,
            "produce_sync mean per call vs 10 ms sleep loop (target <= 0.1x)",
            "ms",
            per_call["conveyor"],
            per_call["sleep"],
            higher_is_better=False,
            note=f"sleep loop: {bench.args.sleep_calls} calls",
        )
    )

    conveyor_rates: list[float] = []
    conveyor_p50: list[float] = []
    flush_rates: list[float] = []
    flush_p50: list[float] = []
    for attempt in range(1, bench.repeats + 1):
        rate, samples = bare_flush_concurrent(
            bench.bootstrap, topics["threads-flush"], seconds, payload
        )
        flush_rates.append(rate)
        flush_p50.append(statistics.median(samples))
        rate, samples = conveyor_concurrent(
            bench.bootstrap, topics["threads-conveyor"], seconds, payload
        )
        conveyor_rates.append(rate)
        conveyor_p50.append(statistics.median(samples))
        bench.console.print(
            f"  {THREADS} threads run {attempt}/{bench.repeats}: conveyor {conveyor_rates[-1]:,.0f} calls/s "
            f"(p50 {conveyor_p50[-1]:.3f} ms), shared flush {flush_rates[-1]:,.0f} calls/s (p50 {flush_p50[-1]:.3f} ms)"
        )
    concurrent_note = f"{THREADS} threads x {seconds:g} s"
    bench.record(
        Figure(
            bench.name,
            f"{THREADS} threads produce_sync calls/s (target >= 1.3x shared flush)",
            "calls/s",
            conveyor_rates,
            flush_rates,
            note=concurrent_note,
        )
    )
    bench.record(
        Figure(
            bench.name,
            f"{THREADS} threads produce_sync p50 (target < shared flush)",
            "ms",
            conveyor_p50,
            flush_p50,
            higher_is_better=False,
            note=concurrent_note,
        )
    )
    bench.report()


if __name__ == "__main__":
    main()
