"""What tracing and metrics cost: consume throughput and end-to-end latency, in one run, with
tracing off, tracing on (OpenTelemetry's SDK with a batch processor and an exporter that
drops everything: the cost of Conveyor's spans, not of shipping them), the same with 1 % of
traces sampled (what a busy service runs), tracing on with the API's no-op tracer (Conveyor's
own work alone: headers and parsing) and metrics on.

Throughput: the no-op consumer of bench/consume_throughput.py on one partition (1,000,000
messages: at 300,000 the measured stretch lasted ~0.2 s and one pause of the shared machine
moved a run by 20 %), each variant on its own topic filled the same way, every message
carrying a W3C traceparent (as from a traced upstream; linking to it is the work tracing
adds), beside the like-for-like bare batch loop; each variant starts after a full garbage
collection, so that what the variant before it left is not counted against it.

Latency: 2,500 msgs/s sent with the variant app's own producer (so a traced variant also pays
for its send spans and headers) to its consumer, p50 of send -> consume() called. Every
variant's app runs at once, each on its own topic, and they take turns in slices of a second
(the order turning each slice), so that the variants of one run meet the same machine: run
one after another for seconds each, two variants' p50s differed by as much as the margin
measured (the machine drifts by ±0.03 ms within a minute).

Targets (issue 14): tracing on >= 0.9x of off in throughput and < +0.1 ms of p50; off is the
existing path (nothing measurable: no hook runs). Issue 39: at 1 % sampling, p50 within
0.03 ms of off and throughput within 5 %.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Producer as BareProducer
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from baselines import bare_batch_consume
from conveyor import App, Consumer
from harness import Bench, Figure, RateMeter

LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets
RATE = 2_500
VARIANTS = ("off", "tracing", "sampled", "api-only", "metrics")


class DropEverything(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def configure(app: App, variant: str) -> tuple[Callable[[], object], Callable[[], None]]:
    """Switch the variant on; returns what exports its spans now (so that a variant's export
    happens in its own turn, not in the next variant's) and what shuts it down after the run."""
    if variant in ("tracing", "sampled"):
        sampler = ParentBased(TraceIdRatioBased(0.01)) if variant == "sampled" else None
        provider = TracerProvider(sampler=sampler)
        provider.add_span_processor(BatchSpanProcessor(DropEverything()))
        app.tracing.enable(tracer_provider=provider)
        return provider.force_flush, provider.shutdown
    if variant == "api-only":  # Conveyor's own work: headers, parsing, links; no SDK spans
        app.tracing.enable(tracer_provider=trace.NoOpTracerProvider())
    if variant == "metrics":
        app.metrics.enable()
    return lambda: None, lambda: None


def new_app(bootstrap: str, offset_reset: str = "earliest", **options: Any) -> App:
    return App(
        client_id="bench",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": offset_reset,
        },
        **options,
    )


def fill_traced(bootstrap: str, topic: str, count: int, payload: bytes) -> None:
    """``count`` messages, each with its own traceparent header (setup, not measured)."""
    rng = random.Random(1)
    producer = BareProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000}
    )
    for _ in range(count):
        header = f"00-{rng.getrandbits(128) | 1:032x}-{rng.getrandbits(64) | 1:016x}-01"
        while True:
            try:
                producer.produce(topic, payload, headers=[("traceparent", header)])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("could not fill the benchmark topic")


def throughput(bootstrap: str, topic: str, count: int, variant: str) -> float:
    meter = RateMeter(count)

    class Counting(Consumer):
        def consume(self) -> None:
            meter.add(len(self.messages))

    app = new_app(bootstrap, concurrency=4, max_messages=500, max_wait_time=0.5)
    app.routes.topic(topic, Counting)
    _flush, shut_down = configure(app, variant)
    gc.collect()  # what the variant before left (its spans, its app) is not this one's to pay
    app.start()
    try:
        if not meter.done.wait(180):
            raise RuntimeError(f"{variant}: consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
        shut_down()
    return meter.rate()


class LatencyRig:
    """One variant's app consuming its own topic, running across the latency slices: each
    :meth:`measure` sends at RATE with the app's producer and returns the slice's samples (ms
    from the send to ``consume()`` called)."""

    def __init__(self, bootstrap: str, topic: str, variant: str) -> None:
        self.topic = topic
        self.variant = variant
        self.samples: list[float] = []
        self._wanted = 0
        self._enough = threading.Event()
        ready, assigned = threading.Event(), threading.Event()
        rig = self

        class Timing(Consumer):
            def consume(self) -> None:
                received = time.monotonic_ns()
                for message in self.messages:
                    for name, value in message.raw_headers or ():
                        if name == "sent":
                            rig.samples.append((received - int(value)) / 1e6)
                        elif name == "warmup":
                            ready.set()
                if len(rig.samples) >= rig._wanted:
                    rig._enough.set()

        self.app = app = new_app(bootstrap, offset_reset="latest")
        app.routes.topic(topic, Timing, initial_offset="latest")
        app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
        self._flush, self._shut_down = configure(app, variant)
        app.start()
        try:
            if not assigned.wait(30):
                raise RuntimeError(f"{variant}: no assignment")
            deadline = time.monotonic() + 30
            while not ready.wait(0.02):  # the same readiness handshake as bench/e2e_latency.py
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{variant}: the consumer never saw a warm-up message")
                app.producer.produce_async(topic=topic, payload=b"w", headers=[("warmup", "1")])
        except BaseException:
            self.close()
            raise

    def measure(self, seconds: float) -> list[float]:
        first = len(self.samples)
        expected = int(seconds * RATE)
        self._wanted = first + expected
        self._enough.clear()
        producer = self.app.producer
        next_send = time.perf_counter()
        for _ in range(expected):
            now = time.perf_counter()
            if next_send > now:
                time.sleep(next_send - now)  # pacing the load generator, not a wait for a result
            producer.produce_async(
                topic=self.topic, payload=b"x" * 100, headers=[("sent", str(time.monotonic_ns()))]
            )
            next_send += 1 / RATE
        if not self._enough.wait(10):  # a short slice would count its stragglers in the next
            raise RuntimeError(f"{self.variant}: {len(self.samples) - first} of {expected} arrived")
        self._flush()  # its spans exported within its own turn
        return self.samples[first:]

    def close(self) -> None:
        try:
            self.app.stop_and_wait()
        finally:
            self._shut_down()


def latency_runs(
    bootstrap: str, topics: dict[str, str], seconds: float, repeats: int, slices: int
) -> dict[str, list[float]]:
    """Per variant, the p50 (ms) of each of ``repeats`` runs, every run ``seconds`` long per
    variant in ``slices`` turns. Each run starts its apps afresh: one app's p50 kept a bias of
    its own (up to ±0.03 ms, whatever its variant) for as long as it ran, so runs sharing
    apps would share it and their median would not see through it."""
    p50s: dict[str, list[float]] = {variant: [] for variant in topics}
    for _ in range(repeats):
        rigs: list[LatencyRig] = []
        try:
            for variant, topic in topics.items():
                rigs.append(LatencyRig(bootstrap, topic, variant))
            for rig in rigs:  # one short unmeasured round of each first (see e2e_latency)
                rig.measure(0.5)
            samples: dict[str, list[float]] = {rig.variant: [] for rig in rigs}
            for turn in range(slices):
                for rig in rigs[turn % len(rigs) :] + rigs[: turn % len(rigs)]:
                    gc.collect()  # as before a throughput run: the last turn's garbage is its own
                    samples[rig.variant].extend(rig.measure(seconds / slices))
            for variant, taken in samples.items():
                p50s[variant].append(statistics.median(taken))
        finally:
            for rig in rigs:
                try:
                    rig.close()
                except Exception as error:  # the others are still closed
                    print(f"{rig.variant}: could not close its app: {error!r}", file=sys.stderr)
    return p50s


def main() -> None:
    bench = Bench(
        "tracing_cost",
        __doc__ or "",
        lambda parser: (
            parser.add_argument("--messages", type=int, default=1_000_000),
            parser.add_argument("--seconds", type=float, default=5.0),
        ),
    )
    count: int = bench.args.messages
    seconds: float = bench.args.seconds
    payload = b'{"order":12345,"customer":"c-0042","total":99.5}'.ljust(100)
    topics = {name: bench.create_topic() for name in ("bare", *VARIANTS)}
    for topic in topics.values():
        fill_traced(bench.bootstrap, topic, count, payload)
    bench.console.print(f"filled {len(topics)} topics with {count:,} traced messages")
    rates: dict[str, list[float]] = {name: [] for name in topics}
    # One unmeasured round first: the first runs after the fill took ~40 % more CPU for the
    # same work (not the write-back of what was filled: a sync right after it took 0.12 s).
    bare_batch_consume(bench.bootstrap, topics["bare"], count, config=LIKE_FOR_LIKE)
    for variant in VARIANTS:
        throughput(bench.bootstrap, topics[variant], count, variant)
    for attempt in range(1, bench.repeats + 1):
        rates["bare"].append(
            bare_batch_consume(bench.bootstrap, topics["bare"], count, config=LIKE_FOR_LIKE)
        )
        # The light variants take turns at going first, and "tracing" (every span kept, ~2 s of
        # heavy allocation) goes last: the variant that used to follow it ran at 0.65-0.75M
        # msgs/s in two runs of three once, and nothing else did.
        light = [variant for variant in VARIANTS if variant != "tracing"]
        turn = (attempt - 1) % len(light)
        for variant in [*light[turn:], *light[:turn], "tracing"]:
            rates[variant].append(throughput(bench.bootstrap, topics[variant], count, variant))
        bench.console.print(
            f"  throughput run {attempt}/{bench.repeats}: "
            + ", ".join(f"{name} {rates[name][-1]:,.0f} msgs/s" for name in rates)
        )
    latency_topics = {name: bench.create_topic() for name in VARIANTS}
    slices = max(1, round(seconds))
    p50s = latency_runs(bench.bootstrap, latency_topics, seconds, bench.repeats, slices)
    for attempt in range(bench.repeats):
        bench.console.print(
            f"  latency run {attempt + 1}/{bench.repeats}: p50 "
            + ", ".join(f"{name} {p50s[name][attempt]:.3f} ms" for name in VARIANTS)
        )
    note = f"{count:,} x 100 B with a traceparent each, 1 partition"
    bench.record(
        Figure(
            bench.name,
            "bare batch loop, same settings (baseline)",
            "msgs/s",
            rates["bare"],
            note=note,
        )
    )
    bench.record(
        Figure(bench.name, "tracing off", "msgs/s", rates["off"], rates["bare"], note=note)
    )
    bench.record(
        Figure(bench.name, "tracing on vs off (target >= 0.9x)", "msgs/s", rates["tracing"], rates["off"],
               note="no-op exporter; the ratio is against tracing off")
    )  # fmt: skip
    bench.record(
        Figure(bench.name, "tracing on, 1 % sampled, vs off (target >= 0.95x)", "msgs/s", rates["sampled"], rates["off"],
               note="ParentBased(TraceIdRatioBased(0.01)): unrecorded spans get no links")
    )  # fmt: skip
    bench.record(
        Figure(bench.name, "tracing, API only vs off", "msgs/s", rates["api-only"], rates["off"],
               note="no SDK: Conveyor's headers and parsing alone")
    )  # fmt: skip
    bench.record(
        Figure(bench.name, "metrics on vs off", "msgs/s", rates["metrics"], rates["off"],
               note="the ratio is against metrics off")
    )  # fmt: skip
    latency_note = (
        f"{RATE:,} msgs/s for {seconds:g} s a run in {slices} turns with the other variants,"
        " sent with the app's producer"
    )
    bench.record(
        Figure(
            bench.name,
            "e2e p50, tracing off",
            "ms",
            p50s["off"],
            higher_is_better=False,
            note=latency_note,
        )
    )
    for variant, target in (
        ("tracing", " (target < off + 0.1 ms)"),
        ("sampled", " (target <= off + 0.03 ms)"),
        ("api-only", ""),
        ("metrics", ""),
    ):
        added = [on - off for on, off in zip(p50s[variant], p50s["off"], strict=True)]
        bench.record(
            Figure(bench.name, f"e2e p50, {variant} on{target}", "ms", p50s[variant], p50s["off"],
                   higher_is_better=False, note=f"added p50 per run: {', '.join(f'{a:+.3f}' for a in added)} ms")
        )  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
