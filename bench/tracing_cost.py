"""What tracing and metrics cost: consume throughput and end-to-end latency, in one run, with
tracing off, tracing on (OpenTelemetry's SDK with a batch processor and an exporter that
drops everything: the cost of Conveyor's spans, not of shipping them), the same with 1 % of
traces sampled (what a busy service runs), tracing on with the API's no-op tracer (Conveyor's
own work alone: headers and parsing) and metrics on.

Throughput: the no-op consumer of bench/consume_throughput.py on one partition, beside the
like-for-like bare batch loop, each side on its own topic of 1,000,000 messages, every message
carrying a W3C traceparent (as from a traced upstream; linking to it is the work tracing
adds), sampled in the 1 % variant's topic as that variant samples (1 % of them flagged), in
the others' all. Every side runs at once and reads only in its turns (20 rounds a run, the order turning
each round; a turn: seek to the start, resume, count from the first batch for 0.3 s, pause):
this machine's speed moves by a third for seconds at a time, and whole runs one after another
put one side in a fast window and the next in a slow one (the same variant measured 1.06M and
1.44M msgs/s a run apart), so that their ratio said more about the machine than about them.
Each turn starts after a full garbage collection and exports its spans before the next turn.
As in the latency half, each variant's app takes two turns a round, its variant off in one and
on in the other (off first and on first alternately), and its ratio is against itself: apps
compared with one another carried a bias of their own (metrics, a few prometheus calls a
batch, came out 0.85-0.95x of a tracing-off app). A variant's ratio is the median of a run's
rounds' on/off ratios, beside the ratio of its whole run's on and off turns; "off" switches
nothing (its ratio is the rig's own spread), and the bare loop takes one turn a round.

Latency: 2,500 msgs/s sent with the variant app's own producer (so a traced variant also pays
for its send spans and headers) to its consumer, p50 of send -> consume() called. Every
variant's apps (two, each on its own topic) run at once and take turns (the order turning each
turn), so that the variants of one run meet the same machine: run one
after another for seconds each, two variants' p50s differed by as much as the margin measured
(the machine drifts by ±0.03 ms within a minute). Each app measures its variant switched off
and on in every turn (off first or on first, alternately, and a variant's two apps in opposite
orders), and a variant's added p50 is against its own apps switched off: one app keeps a p50
bias of its own (up to ±0.03 ms, whatever its variant) for as long as it runs, so a comparison
between apps measured that bias as much as the variant (metrics, which adds nothing between
the send and consume(), came out +0.1 ms above an app of its own with nothing on). The
variant "off" switches nothing: its added p50 is the rig's own spread.

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
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka import Consumer as BareConsumer
from confluent_kafka import Producer as BareProducer
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from conveyor import App, Consumer
from harness import Bench, Figure

Rig = TypeVar("Rig")
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets
RATE = 2_500
VARIANTS = ("off", "sampled", "api-only", "metrics", "tracing")
"""In the order of their turns: off and 1 % sampled (the targets' pair) side by side."""
INSTANCES = 2
"""Latency apps per variant in a run: each app keeps a p50 bias of its own (up to ±0.03 ms)."""


class DropEverything(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class VariantSwitch:
    """Switches a variant on and off in an app, started or not (tracing and metrics both can
    be): the latency half measures each variant's apps with it off and on in turn."""

    def __init__(self, app: App, variant: str) -> None:
        self.on: Callable[[], None] = lambda: None
        self.off: Callable[[], None] = lambda: None
        self.flush: Callable[[], object] = lambda: None
        """Exports the variant's spans now (so that a turn's export happens in its own turn)."""
        self.shut_down: Callable[[], None] = lambda: None
        self.is_on = False
        if variant in ("tracing", "sampled"):
            sampler = ParentBased(TraceIdRatioBased(0.01)) if variant == "sampled" else None
            provider = TracerProvider(sampler=sampler)
            provider.add_span_processor(BatchSpanProcessor(DropEverything()))
            self.on = lambda: app.tracing.enable(tracer_provider=provider)
            self.off = app.tracing.disable
            self.flush, self.shut_down = provider.force_flush, provider.shutdown
        elif variant == "api-only":  # Conveyor's own work: headers, parsing, links; no SDK spans
            self.on = lambda: app.tracing.enable(tracer_provider=trace.NoOpTracerProvider())
            self.off = app.tracing.disable
        elif variant == "metrics":
            self.on, self.off = app.metrics.enable, app.metrics.disable

    def set(self, on: bool) -> None:
        """Switch the variant on (or off); nothing when it is so already."""
        if on != self.is_on:
            (self.on if on else self.off)()
            self.is_on = on


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


def fill_traced(bootstrap: str, topic: str, count: int, payload: bytes, sampled: float) -> None:
    """``count`` messages, each with its own traceparent header, the ``sampled`` share of them
    flagged sampled (setup, not measured)."""
    rng = random.Random(1)
    producer = BareProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000}
    )
    for _ in range(count):
        flags = "01" if rng.random() < sampled else "00"
        header = f"00-{rng.getrandbits(128) | 1:032x}-{rng.getrandbits(64) | 1:016x}-{flags}"
        while True:
            try:
                producer.produce(topic, payload, headers=[("traceparent", header)])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("could not fill the benchmark topic")


def in_turn(rigs: list[Rig], turn: int) -> list[Rig]:
    """``rigs`` from the ``turn``-th on, round to the start (the order turns each round)."""
    first = turn % len(rigs)
    return rigs[first:] + rigs[:first]


def close_all(rigs: Sequence[Any]) -> None:
    """Close every rig (``variant`` and ``close()``), the others even when one fails."""
    for rig in rigs:
        try:
            rig.close()
        except Exception as error:
            print(f"{rig.variant}: could not close: {error!r}", file=sys.stderr)


def close_app(app: App, shut_down: Callable[[], None]) -> None:
    """Stop a variant's app, then shut its tracer provider down (even if the stop failed)."""
    try:
        app.stop_and_wait()
    finally:
        shut_down()


class AppTurns:
    """A variant's app (the no-op consumer of bench/consume_throughput.py) on its own filled
    topic, reading only in its turns, its variant off or on: each :meth:`turn` starts again
    from the topic's first message, counts from the first batch that comes (included) for
    ``seconds`` (or until 80 % of the topic was read), and pauses the partition again."""

    def __init__(self, bootstrap: str, topic: str, count: int, variant: str) -> None:
        self.topic, self.variant = topic, variant
        self.seen = 0
        self.cut_short = 0
        """Turns that reached 80 % of the topic before their time was up."""
        self._limit = int(count * 0.8)
        self._from = 0
        self._first, self._near_end = threading.Event(), threading.Event()
        rig, assigned = self, threading.Event()

        class Counting(Consumer):
            def consume(self) -> None:
                rig.add(len(self.messages))

        # max_wait_time only bounds a poll that finds nothing (here: while paused, before the
        # next turn's commands run); a loaded poll returns at once.
        self.app = app = new_app(bootstrap, concurrency=4, max_messages=500, max_wait_time=0.1)
        app.routes.topic(topic, Counting)
        app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
        self._switch = VariantSwitch(app, variant)
        self.flush = self._switch.flush
        app.start()
        try:
            if not assigned.wait(30) or not self._first.wait(30):
                raise RuntimeError(f"{variant}: not consuming")
            app.pause(topic, 0)
        except BaseException:
            self.close()
            raise

    def add(self, messages: int) -> None:
        self.seen += messages  # one partition: its batches run one at a time
        self._first.set()
        if self.seen - self._from >= self._limit:
            self._near_end.set()

    def turn(self, seconds: float, on: bool = False) -> tuple[int, float]:
        """Read for ``seconds`` with the variant ``on`` (or off); (messages, seconds)."""
        self._switch.set(on)  # while paused: nothing is in flight
        self._first.clear()
        self._near_end.clear()
        self._from = self.seen
        self.app.seek(self.topic, 0, 0)
        self.app.resume(self.topic, 0)
        if not self._first.wait(30):
            raise RuntimeError(f"{self.variant}: nothing came after the resume")
        started, counted = time.perf_counter(), self._from  # the first batch counts (one of
        if self._near_end.wait(seconds):  # ~1,000 a turn; the bare loop's first counts too)
            self.cut_short += 1
        messages, elapsed = self.seen - counted, time.perf_counter() - started
        self.app.pause(self.topic, 0)
        return messages, elapsed

    def close(self) -> None:
        close_app(self.app, self._switch.shut_down)


class BareTurns:
    """The bare batch loop of bench/baselines.py (the same librdkafka settings), taking its
    turns as :class:`AppTurns` does."""

    variant = "bare"

    def __init__(self, bootstrap: str, topic: str, count: int) -> None:
        self.cut_short = 0
        self._limit = int(count * 0.8)
        self._partition = TopicPartition(topic, 0, OFFSET_BEGINNING)
        self._consumer = BareConsumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **LIKE_FOR_LIKE,
        })  # fmt: skip
        self._consumer.assign([self._partition])
        self._read_until(time.monotonic() + 30, lambda taken: taken > 0)
        self._consumer.pause([self._partition])

    def flush(self) -> None:
        pass

    def _read_until(self, deadline: float, enough: Callable[[int], bool]) -> int:
        taken = 0
        consume = self._consumer.consume
        while not enough(taken):
            taken += sum(1 for message in consume(num_messages=500, timeout=0.1)
                         if message.error() is None)  # fmt: skip
            if time.monotonic() > deadline:
                break
        return taken

    def turn(self, seconds: float, on: bool = False) -> tuple[int, float]:
        consumer = self._consumer
        consumer.seek(TopicPartition(self._partition.topic, 0, 0))
        consumer.resume([self._partition])
        messages = self._read_until(time.monotonic() + 30, lambda taken: taken > 0)
        if not messages:
            raise RuntimeError("bare: nothing came after the resume")
        started = time.perf_counter()
        ends = started + seconds
        limit = self._limit
        consume = consumer.consume
        while True:
            messages += sum(1 for message in consume(num_messages=500, timeout=0.1)
                            if message.error() is None)  # fmt: skip
            now = time.perf_counter()
            if now >= ends:
                break
            if messages >= limit:
                self.cut_short += 1
                break
        consumer.pause([self._partition])
        return messages, now - started

    def close(self) -> None:
        self._consumer.close()


def throughput_runs(
    bootstrap: str, topics: dict[str, str], count: int, turns: int, seconds: float, repeats: int
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, list[float]], int]:
    """Per side, the (off, on) msgs/s of each of ``repeats`` runs: every side (the bare loop and
    each variant's app) reads its own topic in ``turns`` rounds, the order turning each round,
    so that the sides of one run meet the same machine; an app takes two turns of ``seconds``
    a round, its variant off and on (which first alternates from round to round), the bare loop
    one (its rate is given as both). Returns the rates, per variant the median over each run's
    rounds of its on/off ratio (the two turns of a round are consecutive: they met the same
    machine), and how many turns were cut short by the end of a topic."""
    rates: dict[str, list[tuple[float, float]]] = {side: [] for side in topics}
    paired: dict[str, list[float]] = {side: [] for side in topics if side != "bare"}
    cut_short = 0
    for _ in range(repeats):
        rigs: list[AppTurns | BareTurns] = []
        try:
            rigs.append(BareTurns(bootstrap, topics["bare"], count))
            for variant in VARIANTS:
                rigs.append(AppTurns(bootstrap, topics[variant], count, variant))
            totals = {(rig.variant, on): [0, 0.0] for rig in rigs for on in (False, True)}
            rounds: dict[tuple[str, bool], list[float]] = {key: [] for key in totals}
            for rig in rigs:  # one unmeasured turn each way
                for on in (True, False):
                    rig.turn(seconds / 2, on)
                    rig.flush()
            for turn in range(turns):
                for rig in in_turn(rigs, turn):
                    states = (False,) if rig.variant == "bare" else (False, True)
                    for on in states if turn % 2 == 0 else states[::-1]:
                        gc.collect()  # the last turn's garbage is not this one's to pay
                        messages, elapsed = rig.turn(seconds, on)
                        rig.flush()  # its spans exported now, not in the next side's turn
                        totals[rig.variant, on][0] += messages
                        totals[rig.variant, on][1] += elapsed
                        rounds[rig.variant, on].append(messages / elapsed)
            for rig in rigs:
                off_messages, off_elapsed = totals[rig.variant, False]
                on_messages, on_elapsed = totals[rig.variant, True]
                off_rate = off_messages / off_elapsed
                on_rate = on_messages / on_elapsed if on_elapsed else off_rate
                rates[rig.variant].append((off_rate, on_rate))
            for side, ratios in paired.items():
                ratios.append(
                    statistics.median(
                        on / off
                        for on, off in zip(rounds[side, True], rounds[side, False], strict=True)
                    )
                )
            cut_short += sum(rig.cut_short for rig in rigs)
        finally:
            close_all(rigs)
    return rates, paired, cut_short


class LatencyRig:
    """One variant's app consuming its own topic, running across the latency slices with the
    variant off and on in turn: each :meth:`measure` sends at RATE with the app's producer and
    returns the slice's samples (ms from the send to ``consume()`` called)."""

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
        self._switch = VariantSwitch(app, variant)
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

    def measure(self, seconds: float, on: bool) -> list[float]:
        """Samples of ``seconds`` at RATE with the variant ``on`` (or off)."""
        self._switch.set(on)
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
        self._switch.flush()  # its spans exported within its own turn
        return self.samples[first:]

    def close(self) -> None:
        close_app(self.app, self._switch.shut_down)


def latency_runs(
    bootstrap: str, topics: dict[str, list[str]], seconds: float, repeats: int, slices: int
) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Per variant, of each of ``repeats`` runs: the p50 (ms) with it off, with it on, and the
    p50 it adds, measured in the same apps: every run is ``seconds`` long per variant and
    state, in ``slices`` turns shared by the variant's apps (one per topic), each app taking its
    turn's two slices off then on, or on then off: alternately from turn to turn, and a
    variant's two apps in opposite orders within a turn (``slices`` even), so that neither state
    is more often the slice after the switch, nor the turn's first. The added p50 is the median
    over a run's turns and apps of the on slice's p50 less the off slice's: the two slices are
    consecutive, and the machine's drift over tens of seconds (as large as the target)
    falls out of each difference, where pooled samples of a few slices a state kept it.
    Paired so because an app keeps a p50 bias of its own (up to ±0.03 ms, whatever its variant)
    for as long as it runs: compared between apps, a variant's added p50 was that bias as much
    as its cost. Each run starts its apps afresh, and a variant's p50 pools its apps' samples."""
    p50s: dict[str, tuple[list[float], list[float], list[float]]] = {
        v: ([], [], []) for v in topics
    }
    instances = max(len(names) for names in topics.values())
    for _ in range(repeats):
        rigs: list[LatencyRig] = []
        try:
            for instance in range(instances):  # a variant's apps apart in the turns' order
                for variant, names in topics.items():
                    if instance < len(names):
                        rigs.append(LatencyRig(bootstrap, names[instance], variant))
            for rig in rigs:  # one short unmeasured round of each first (see e2e_latency)
                rig.measure(0.25, True)
                rig.measure(0.25, False)
            samples: dict[tuple[str, bool], list[float]] = {
                (variant, on): [] for variant in topics for on in (False, True)
            }
            differences: dict[str, list[float]] = {variant: [] for variant in topics}
            for turn in range(slices):
                for rig in in_turn(rigs, turn):
                    names = topics[rig.variant]
                    share = seconds / slices / len(names)
                    off_first = (turn + names.index(rig.topic)) % 2 == 0
                    p50 = {}
                    for on in (False, True) if off_first else (True, False):
                        gc.collect()  # as before a throughput turn: the garbage is its own
                        taken = rig.measure(share, on)
                        samples[rig.variant, on].extend(taken)
                        p50[on] = statistics.median(taken)
                    differences[rig.variant].append(p50[True] - p50[False])
            for variant, (offs, ons, added) in p50s.items():
                offs.append(statistics.median(samples[variant, False]))
                ons.append(statistics.median(samples[variant, True]))
                added.append(statistics.median(differences[variant]))
        finally:
            close_all(rigs)
    return p50s


def main() -> None:
    bench = Bench(
        "tracing_cost",
        __doc__ or "",
        lambda parser: (
            parser.add_argument("--messages", type=int, default=1_000_000),
            parser.add_argument("--seconds", type=float, default=5.0),
            parser.add_argument("--turns", type=int, default=20),
            parser.add_argument("--turn-seconds", type=float, default=0.3),
        ),
    )
    count: int = bench.args.messages
    seconds: float = bench.args.seconds
    if bench.args.turns < 1 or bench.args.turn_seconds <= 0:
        raise SystemExit(
            "bench/tracing_cost.py: --turns needs 1 or more, --turn-seconds more than 0"
        )
    payload = b'{"order":12345,"customer":"c-0042","total":99.5}'.ljust(100)
    topics = {name: bench.create_topic() for name in ("bare", *VARIANTS)}
    for variant, topic in topics.items():
        # The 1 % variant's upstream samples as it does (ParentBased carries a root's decision
        # on): with every upstream trace sampled, each batch of one message was a recorded
        # child span, the cost of tracing everything upstream, not of sampling 1 %.
        fill_traced(bench.bootstrap, topic, count, payload, 0.01 if variant == "sampled" else 1.0)
    bench.console.print(f"filled {len(topics)} topics with {count:,} traced messages")
    rates, paired, cut_short = throughput_runs(
        bench.bootstrap, topics, count, bench.args.turns, bench.args.turn_seconds, bench.repeats
    )
    for attempt in range(bench.repeats):
        bench.console.print(
            f"  throughput run {attempt + 1}/{bench.repeats}: bare"
            f" {rates['bare'][attempt][0]:,.0f} msgs/s; off -> on "
            + ", ".join(
                f"{name} {rates[name][attempt][0]:,.0f} -> {rates[name][attempt][1]:,.0f}"
                for name in VARIANTS
            )
            + " msgs/s; round by round on/off: "
            + ", ".join(f"{name} {paired[name][attempt]:.3f}x" for name in paired)
        )
    if cut_short:
        bench.console.print(
            f"  {cut_short} turns reached 80 % of their topic before their time (more --messages)"
        )
    # "off" switches nothing: its added p50 is the rig's own spread.
    latency_topics = {name: [bench.create_topic() for _ in range(INSTANCES)] for name in VARIANTS}
    slices = max(2, 2 * round(seconds * 2))  # even: each order as often as the other
    p50s = latency_runs(bench.bootstrap, latency_topics, seconds, bench.repeats, slices)
    for attempt in range(bench.repeats):
        bench.console.print(
            f"  latency run {attempt + 1}/{bench.repeats}: p50 off -> on "
            + ", ".join(
                f"{name} {off[attempt]:.3f} -> {on[attempt]:.3f} ms"
                for name, (off, on, _added) in p50s.items()
            )
        )
    note = (
        f"{bench.args.turns} rounds of {bench.args.turn_seconds:g} s turns a run, interleaved;"
        f" topics of {count:,} x 100 B with a traceparent each, 1 partition"
    )
    bare = [off for off, _on in rates["bare"]]
    bench.record(
        Figure(bench.name, "bare batch loop, same settings (baseline)", "msgs/s", bare, note=note)
    )
    bench.record(
        Figure(bench.name, "tracing off", "msgs/s", [off for off, _on in rates["off"]], bare,
               note="the app of the variant that switches nothing")
    )  # fmt: skip

    for variant, label, detail in (
        ("tracing", "tracing on vs off, whole runs (target >= 0.9x)", "no-op exporter"),
        ("sampled", "1 % sampled vs off, whole runs",
         "ParentBased(TraceIdRatioBased(0.01)): unrecorded spans get no links"),
        ("api-only", "tracing, API only vs off, whole runs", "no SDK: Conveyor's headers and parsing alone"),
        ("metrics", "metrics on vs off, whole runs", "prometheus-client"),
    ):  # fmt: skip
        ratios = [on / off for off, on in rates[variant]]  # each run against itself
        on_rates = ", ".join(f"{on:,.0f}" for _off, on in rates[variant])
        bench.record(
            Figure(bench.name, label, "x", ratios,
                   note=f"{detail}; per run, its on turns' rate over its off turns' (the same"
                        f" app, the same run); on: {on_rates} msgs/s")
        )  # fmt: skip
    bench.record(
        Figure(bench.name, "1 % sampled vs off, round by round (target >= 0.95x)", "x", paired["sampled"],
               note="per run, the median of the rounds' on/off ratios of the same app")
    )  # fmt: skip
    bench.record(
        Figure(bench.name, "nothing switched, round by round (the rig's spread)", "x", paired["off"],
               note="the 'off' variant's app, its two turns a round compared as the others'")
    )  # fmt: skip
    latency_note = (
        f"{RATE:,} msgs/s for {seconds:g} s a run and state in {slices} turns with the other"
        f" variants, shared by {INSTANCES} apps a variant, each app off and on in turn,"
        " sent with the app's producer"
    )
    bench.record(
        Figure(
            bench.name,
            "e2e p50, tracing off",
            "ms",
            p50s["off"][0],
            higher_is_better=False,
            note=latency_note,
        )
    )
    for variant, target in (
        ("off", " (nothing switched: the rig's spread)"),
        ("tracing", " (target < +0.1 ms)"),
        ("sampled", " (target <= +0.03 ms)"),
        ("api-only", ""),
        ("metrics", ""),
    ):
        off, on, added = p50s[variant]
        bench.record(
            Figure(bench.name, f"e2e p50 added, {variant} on{target}", "ms", added,
                   higher_is_better=False, difference=True,
                   note=f"the median of paired slices' differences (the same app off and on,"
                        f" consecutive); pooled p50s off -> on: {', '.join(f'{a:.3f} -> {b:.3f}' for a, b in zip(off, on, strict=True))} ms")
        )  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
