"""Listener packing: throughput and lone-message latency of 1, 2, 4 and 8 topics read by 1, 2
and 4 listeners (``App(max_listeners=L)``), beside as many bare confluent-kafka consumers.

Each combination of topics and listeners has its own topics (topic i has 1 + i % 4
partitions), filled with ``--messages`` 100-byte messages spread evenly over them. A run
holds the consumers back until their group is stable with every member holding partitions
(Conveyor's start at the end, ``latest``, and seek every partition to its start then; the
bare ones pause what they are assigned, and resume then): so the clock
(harness.RateMeter: from 10 % of the messages to the last) never counts the joins and
rebalances of a group whose members arrive one by one. Once everything was read the topics
are idle, and the same consumers measure the lone-message latency: one message produced to
one topic (round-robin over them) at a time, timed until a consumer sees it. Either side
blocks at most 50 ms for a first message (``max_wait_time=0.05``) and lets the broker hold
an empty fetch at most 50 ms (``fetch.wait.max.ms=50``), so that the seeks take effect
together; a message that comes ends either wait at once. One unmeasured round of both sides
comes first.

The baseline, measured alternately in the same run on the same topics: one bare batch loop
(``consume(num_messages=500)``, Conveyor's ``fetch.queue.backoff.ms=10``) per listener, each
on its own thread and subscribed to the same topics as that listener (the same packing), all
in one consumer group. Combinations with more listeners than topics are skipped (packing never
makes more listeners than topics). ``--quick`` runs a small subset once, to check the script.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer as BareConsumer
from confluent_kafka import Producer as BareProducer
from confluent_kafka import TopicPartition
from rich.table import Table

from baselines import fill_topic
from conveyor import Admin, App, Consumer
from conveyor.routing.packing import pack
from harness import Bench, Figure, RateMeter

PAYLOAD = b"x" * 100
LONE = b"lone"
# fetch.queue.backoff.ms: what Conveyor's listener sets. fetch.wait.max.ms: a seek (or a
# resume) takes effect once the fetch in flight returns, which on an idle partition is after
# fetch.wait.max.ms (500 ms by default): 50 ms lets every partition start within ~0.1 s of
# the others. Under load, and for a lone message, a fetch returns as soon as data is there.
LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10, "fetch.wait.max.ms": 50}
# How long either side blocks for a first message: short, so that Conveyor's seeks (which
# wait for the listener's current poll) land together; a lone message ends a wait at once.
WAIT = 0.05


class Lone:
    """The lone message in flight: when it was sent, and a wake-up for when it is seen."""

    def __init__(self) -> None:
        self.active = False  # set once the throughput part is over: only then are payloads read
        self.seen = threading.Event()
        self.seen_at = 0.0

    def saw(self, payloads: Any) -> None:
        if self.active and any(payload == LONE for payload in payloads):
            self.seen_at = time.perf_counter()
            self.seen.set()

    def measure(self, bootstrap: str, topics: list[str], samples: int) -> list[float]:
        """``samples`` latencies (ms), one message at a time, round-robin over ``topics``."""
        producer = BareProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.active = True
        latencies = []
        for index in range(samples):
            self.seen.clear()
            sent = time.perf_counter()
            producer.produce(topics[index % len(topics)], LONE)
            producer.poll(0)
            if not self.seen.wait(10):
                raise RuntimeError("a lone message was not seen within 10 s")
            latencies.append((self.seen_at - sent) * 1000)
        producer.flush(10)
        return latencies


def wait_stable(admin: Admin, group: str, members: int, partitions: int) -> None:
    """Until ``group`` is stable with ``members`` members holding ``partitions`` in all."""
    deadline = time.monotonic() + 90
    pause = threading.Event()
    while time.monotonic() < deadline:
        try:
            info = admin.describe_consumer_group(group)
            held = sum(len(member.assignment) for member in info.members)
            holding = sum(1 for member in info.members if member.assignment)
            if info.state == "STABLE" and holding == members and held == partitions:
                return
        except Exception:  # the group is still forming
            pass
        pause.wait(0.1)  # the broker forms the group: nothing here to wait on
    raise RuntimeError(f"group {group} never had {members} members holding {partitions}")


def conveyor_run(
    bench: Bench, admin: Admin, topics: dict[str, int], listeners: int, count: int, samples: int
) -> tuple[float, list[float]]:
    """msgs/s and lone-message latencies (ms) of an app with ``max_listeners=listeners``."""
    meter, lone = RateMeter(count), Lone()

    class Counting(Consumer):
        def consume(self) -> None:
            meter.add(len(self.messages))
            if lone.active:
                lone.saw(self.messages.raw_payloads)

    group = f"bench-packing-{uuid.uuid4().hex[:8]}"
    app = App(client_id="bench-packing",
              kafka={"bootstrap.servers": bench.bootstrap, "group.id": group,
                     "fetch.wait.max.ms": LIKE_FOR_LIKE["fetch.wait.max.ms"]},
              concurrency=4, max_messages=500, max_wait_time=WAIT, max_listeners=listeners)  # fmt: skip
    for topic in topics:
        app.routes.topic(topic, Counting, initial_offset="latest")
    app.start()
    try:
        members = len(app.snapshot().listeners)
        wait_stable(admin, group, members, sum(topics.values()))
        deadline, pause = time.monotonic() + 30, threading.Event()
        while len(app.snapshot().partitions) < sum(topics.values()):  # the listeners saw it too
            if time.monotonic() > deadline:
                raise RuntimeError("the listeners never took every partition")
            pause.wait(0.05)  # a read-only view of the engine: nothing to wait on
        # All at once: each waits for its listener's current poll (up to max_wait_time).
        with ThreadPoolExecutor(max_workers=sum(topics.values())) as seeking:
            for done in [
                seeking.submit(app.seek, topic, partition, 0)
                for topic, partitions in topics.items()
                for partition in range(partitions)
            ]:
                done.result()
        if not meter.done.wait(120):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
        latencies = lone.measure(bench.bootstrap, list(topics), samples)
    finally:
        app.stop_and_wait()
    return meter.rate(), latencies


def bare_run(
    bench: Bench, admin: Admin, topics: dict[str, int], listeners: int, count: int, samples: int
) -> tuple[float, list[float]]:
    """The same with one bare batch loop per listener, on the same packing."""
    meter, lone = RateMeter(count), Lone()
    group = f"bench-packing-bare-{uuid.uuid4().hex[:8]}"
    go, stop = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def loop(subscribed: list[str]) -> None:
        consumer = BareConsumer({
            "bootstrap.servers": bench.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **LIKE_FOR_LIKE,
        })  # fmt: skip

        def on_assign(_consumer: Any, partitions: list[TopicPartition]) -> None:
            consumer.assign(partitions)
            if not go.is_set():  # held until the group is stable (Conveyor's side seeks)
                consumer.pause(partitions)

        consumer.subscribe(subscribed, on_assign=on_assign)
        resumed = False
        try:
            while not stop.is_set():
                # Conveyor's adaptive batch by hand: block for the first message, then take
                # what librdkafka holds without waiting (consume(500, t) would hold a lone
                # message until 500 came or t passed).
                batch = consumer.consume(num_messages=1, timeout=WAIT)
                if batch:
                    batch += consumer.consume(num_messages=499, timeout=0)
                batch = [message for message in batch if not message.error()]
                if batch:
                    meter.add(len(batch))
                    if lone.active:
                        lone.saw(message.value() for message in batch)
                if go.is_set() and not resumed:  # on the consumer's own thread
                    consumer.resume(consumer.assignment())
                    resumed = True
        except BaseException as exc:  # reported by the run
            failures.append(exc)
        finally:
            consumer.close()

    packs = pack(topics, listeners)
    threads = [threading.Thread(target=loop, args=(names,), daemon=True) for names in packs]
    for thread in threads:
        thread.start()
    try:
        wait_stable(admin, group, len(packs), sum(topics.values()))
        go.set()
        if not meter.done.wait(120) or failures:
            raise RuntimeError(f"bare consumers read {meter.seen} of {count}: {failures}")
        latencies = lone.measure(bench.bootstrap, list(topics), samples)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    return meter.rate(), latencies


def main() -> None:
    bench = Bench(
        "listener_packing",
        __doc__ or "",
        lambda parser: (
            parser.add_argument(
                "--messages",
                type=int,
                default=1_000_000,
                help="messages per combination, over all its topics",
            ),
            parser.add_argument("--topics", default="1,2,4,8", help="topic counts"),
            parser.add_argument("--listeners", default="1,2,4", help="listener counts"),
            parser.add_argument(
                "--samples", type=int, default=100, help="lone messages timed per run"
            ),
            parser.add_argument(
                "--quick",
                action="store_true",
                help="1 and 2 topics on 1 and 2 listeners, 20,000 messages, "
                "20 samples, one run: checks that the script works",
            ),
        ),
    )
    args = bench.args
    if args.quick:
        args.messages, args.topics, args.listeners, args.samples = 20_000, "1,2", "1,2", 20
        bench.repeats = 1
    topic_counts = [int(n) for n in args.topics.split(",")]
    listener_counts = [int(n) for n in args.listeners.split(",")]
    combinations = [(n, lc) for n in topic_counts for lc in listener_counts if lc <= n]
    admin = Admin({"bootstrap.servers": bench.bootstrap})
    results: dict[tuple[int, int], dict[str, list[float]]] = {}
    for n, listeners in combinations:
        topics = {bench.create_topic(partitions=1 + i % 4): 1 + i % 4 for i in range(n)}
        per_topic = args.messages // n
        for topic, partitions in topics.items():
            fill_topic(bench.bootstrap, topic, per_topic, PAYLOAD, partitions=partitions)
        count = per_topic * n
        runs: dict[str, list[float]] = {"ours": [], "bare": [], "ours_p50": [], "bare_p50": []}
        sides: tuple[tuple[str, Callable[..., tuple[float, list[float]]]], ...] = (
            ("bare", bare_run), ("ours", conveyor_run),
        )  # fmt: skip
        if not results:  # one unmeasured round first: a process's first run lags on either side
            for _, run in sides:
                run(bench, admin, topics, listeners, count, args.samples)
        for attempt in range(1, bench.repeats + 1):
            for side, run in sides:
                rate, latencies = run(bench, admin, topics, listeners, count, args.samples)
                runs[side].append(rate)
                runs[f"{side}_p50"].append(statistics.median(latencies))
            bench.console.print(
                f"  {n} topic(s), {listeners} listener(s), run {attempt}/{bench.repeats}: "
                f"Conveyor {runs['ours'][-1]:,.0f} msgs/s, p50 {runs['ours_p50'][-1]:.2f} ms; "
                f"bare {runs['bare'][-1]:,.0f} msgs/s, p50 {runs['bare_p50'][-1]:.2f} ms"
            )
        results[(n, listeners)] = runs
        note = f"{count:,} x 100 B over {sum(topics.values())} partitions"
        bench.record(Figure(bench.name, f"{n} topic(s), {listeners} listener(s): throughput",
                            "msgs/s", runs["ours"], runs["bare"], note=note))  # fmt: skip
        bench.record(Figure(bench.name, f"{n} topic(s), {listeners} listener(s): lone p50", "ms",
                            runs["ours_p50"], runs["bare_p50"], higher_is_better=False,
                            note=f"{args.samples} lone messages per run"))  # fmt: skip
    admin.close()
    bench.report()
    print_matrix(bench, results, topic_counts, listener_counts)


def print_matrix(
    bench: Bench,
    results: dict[tuple[int, int], dict[str, list[float]]],
    topic_counts: list[int],
    listener_counts: list[int],
) -> None:
    """Conveyor's medians as one table: a row per topic count, a column per listener count,
    each cell its throughput, its lone p50 and its throughput over the bare loops'."""
    table = Table(title="listener_packing — Conveyor: msgs/s · lone p50 · ratio to bare",
                  title_justify="left")  # fmt: skip
    table.add_column("topics", justify="right")
    for listeners in listener_counts:
        table.add_column(f"{listeners} listener(s)", justify="right")
    for n in topic_counts:
        cells = []
        for listeners in listener_counts:
            runs = results.get((n, listeners))
            if runs is None:
                cells.append("-")
                continue
            ours, bare = statistics.median(runs["ours"]), statistics.median(runs["bare"])
            p50 = statistics.median(runs["ours_p50"])
            cells.append(f"{ours:,.0f} · {p50:.2f} ms · {ours / bare:.2f}x")
        table.add_row(str(n), *cells)
    bench.console.print(table)


if __name__ == "__main__":
    main()
