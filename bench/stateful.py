"""Stateful processing: a count per key kept in a state store, and a 1 s tumbling window
count, beside a bare confluent-kafka loop, Quix Streams and Kafka Streams.

Data, the same for every side and each side on its own topic: 100 B JSON payloads over
10,000 keys, 4 partitions (a key always on one partition), timestamps 100,000 messages to
the second of event time (so a 1 s window holds about 10 messages per key). Each run reads
its side's topic from the start with a new group.

Figures:

* count per key with its changelog: Conveyor (``state=Store()``, RocksDB; the writes of a
  partition's batches flushed to the changelog and the store every ``state_flush_interval``,
  1 s, before their offsets are marked; and, for reference, flushed at each batch's end)
  beside the bare loop (``consume(num_messages=500)`` with ``fetch.queue.backoff.ms=10`` as
  Conveyor's listener sets it; a dict of counts; per batch each changed key produced once to
  a compacted changelog with Conveyor's producer settings and acknowledged, then one
  rocksdict write batch), Quix Streams and Kafka Streams. Targets: >= 500,000 msgs/s,
  >= 0.7x the bare loop, >= 5x Quix Streams.
* exactly-once count per key: the blocks of every partition's batches join one transaction,
  committed every ``transaction_interval`` (1 s, as the at-least-once flush interval) with the
  changelog records and the offsets; against the at-least-once figure. Target >= 0.6x. And,
  for reference, one transaction per batch (``transaction_interval=0``).
* 1 s tumbling window count per key, results emitted nowhere (every side keeps its open
  windows in its store with a changelog). Targets: >= 400,000 msgs/s, >= 5x Quix Streams,
  Kafka Streams' figure beside it.

Quix Streams 3.28 runs in the peers' environment (``bench/_peers.py``), Kafka Streams 4.1.1 in
a JVM of its own (``bench/_kafka_streams.py``: fetched with Maven, compiled with the broker's
JDK), each with its defaults (Quix: a 5 s commit interval; Kafka Streams: one stream thread,
a 30 s commit interval, record caches); neither is among Conveyor's dependencies.
``--no-peers`` measures Conveyor and the bare loop only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import rocksdict
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer

from _kafka_streams import kafka_streams
from _peers import peers_python
from conveyor import Admin, App, Consumer
from conveyor.serialization import json_dumps
from conveyor.state import Store, Tumbling
from harness import Bench, Figure, RateMeter

HERE = Path(__file__).resolve().parent
KEYS = 10_000
PARTITIONS = 4
EVENTS_PER_SECOND = 100_000  # of event time: the messages' timestamps
PRODUCER_SETTINGS = {"acks": "all", "enable.idempotence": True, "linger.ms": 0}  # Conveyor's


def fill(bootstrap: str, topic: str, count: int) -> None:
    """``count`` keyed messages, key ``k-N`` (N < KEYS) always on partition N % 4, stamped
    EVENTS_PER_SECOND to the second ending now (setup, not measured)."""
    payload = b'{"user":"u-0042","page":"/pricing","ms":131,"ok":true}'
    payload += b" " * (100 - len(payload))
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000}
    )
    start = int(time.time() * 1000) - count * 1000 // EVENTS_PER_SECOND - 1000
    for index in range(count):
        number = index % KEYS
        while True:
            try:
                producer.produce(
                    topic, payload, key=f"k-{number}", partition=number % PARTITIONS,
                    timestamp=start + index * 1000 // EVENTS_PER_SECOND,
                )  # fmt: skip
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("could not fill the benchmark topic")


def bare_count(bootstrap: str, topic: str, changelog: str, count: int, folder: Path) -> float:
    """A dict of counts per key; per consumed batch, each changed key produced once to a
    changelog topic (flushed: acknowledged) and then one rocksdict write batch."""
    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False,
         "fetch.queue.backoff.ms": 10},
    )  # fmt: skip
    consumer.subscribe([topic])
    producer = KafkaProducer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS})
    db = rocksdict.Rdict(str(folder), rocksdict.Options(raw_mode=True))
    counts: dict[bytes, int] = {}
    meter = RateMeter(count)
    deadline = time.monotonic() + 300
    try:
        while not meter.done.is_set() and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=500, timeout=1.0)
            changed: dict[tuple[int, bytes], int] = {}
            for message in batch:
                if message.error() is not None:
                    continue
                key = message.key()
                counts[key] = number = counts.get(key, 0) + 1
                changed[message.partition(), key] = number
            if not changed:
                continue
            written = rocksdict.WriteBatch(raw_mode=True)
            for (partition, key), number in changed.items():
                value = json_dumps(number)
                producer.produce(changelog, value, key=key, partition=partition)
                written.put(key, value)
            if producer.flush(30):
                raise RuntimeError("the bare loop's changelog records were not acknowledged")
            db.write(written)
            meter.add(sum(1 for message in batch if message.error() is None))
    finally:
        consumer.close()
        db.close()
    return meter.rate()


def conveyor_count(
    bootstrap: str, topic: str, count: int, folder: Path, exactly_once: bool = False,
    flush_interval: float | None = None, transaction_interval: float = 0.0,
) -> float:  # fmt: skip
    meter = RateMeter(count)

    class Counting(Consumer):
        def consume(self) -> None:
            counts = self.state
            if exactly_once:
                with self.transaction():
                    for message in self.messages:
                        counts[message.key] = counts.get(message.key, 0) + 1
                    self.mark_as_consumed(self.messages.last)
            else:
                for message in self.messages:
                    counts[message.key] = counts.get(message.key, 0) + 1
            meter.add(len(self.messages))

    return _run_conveyor(
        bootstrap, topic, Counting, meter, folder, flush_interval=flush_interval,
        transaction_interval=transaction_interval,
    )  # fmt: skip


def conveyor_window(bootstrap: str, topic: str, count: int, folder: Path) -> float:
    meter = RateMeter(count)

    class Windowed(Consumer):
        window = Tumbling(1).count()

        def consume(self) -> None:
            for closed in self.window.update(self.messages):
                del closed
            meter.add(len(self.messages))

    return _run_conveyor(bootstrap, topic, Windowed, meter, folder, state=None)


def _run_conveyor(
    bootstrap: str, topic: str, consumer: type[Consumer], meter: RateMeter, folder: Path,
    state: Any = "store", flush_interval: float | None = None, transaction_interval: float = 0.0,
) -> float:  # fmt: skip
    group = f"bench-{uuid.uuid4().hex[:8]}"
    settings: dict[str, Any] = {"transaction_interval": transaction_interval}
    if flush_interval is not None:
        settings["state_flush_interval"] = flush_interval
    app = App(
        client_id="bench",
        kafka={"bootstrap.servers": bootstrap, "group.id": group,
               "auto.offset.reset": "earliest"},
        concurrency=4, max_messages=500, max_wait_time=0.5, state_dir=str(folder), **settings,
    )  # fmt: skip
    options: dict[str, Any] = {"state": Store()} if state == "store" else {}
    app.routes.topic(topic, consumer, **options)
    app.start()
    try:
        if not meter.done.wait(300):
            raise RuntimeError(f"Conveyor counted {meter.seen} of {meter.count}")
    finally:
        app.stop_and_wait()
        _delete_changelogs(app, group)
    return meter.rate()


def _delete_changelogs(app: App, group: str) -> None:
    for topic in app.admin.list_topics():
        if topic.startswith(group) and topic.endswith("-changelog"):
            app.admin.delete_topic(topic)


def quix(bootstrap: str, topic: str, count: int, variant: str, folder: Path) -> float:
    """Quix Streams in the peers' environment; its changelog topics deleted after."""
    group = f"bench-quix-{uuid.uuid4().hex[:8]}"
    try:
        done = subprocess.run(
            [peers_python(), str(HERE / "_state_quix.py"), bootstrap, topic, str(count),
             variant, str(folder), group],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    finally:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for name in admin.list_topics():
                if group in name:
                    admin.delete_topic(name)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Quix Streams failed: {done.stderr[-2000:]}")
    return float(json.loads(lines[-1])["rate"])


SIDES = ("bare", "conveyor", "per-batch", "eos", "eos-per-batch", "quix", "kstreams", "window",
         "quix-window", "kstreams-window")  # fmt: skip


def _measure(bench: Bench, side: str, topic: str, count: int, folder: Path) -> float:
    bootstrap = bench.bootstrap
    if side == "bare":
        changelog = bench.create_topic(PARTITIONS, config={"cleanup.policy": "compact"})
        return bare_count(bootstrap, topic, changelog, count, folder)
    if side in ("conveyor", "per-batch", "eos", "eos-per-batch"):
        interval = 0 if side == "per-batch" else None
        exactly_once = side.startswith("eos")
        joint = 1.0 if side == "eos" else 0.0
        return conveyor_count(bootstrap, topic, count, folder, exactly_once, interval, joint)
    if side == "window":
        return conveyor_window(bootstrap, topic, count, folder)
    if side.startswith("kstreams"):
        variant = "window" if side == "kstreams-window" else "count"
        return kafka_streams(bootstrap, topic, count, variant, folder)
    return quix(bootstrap, topic, count, "window" if side == "quix-window" else "count", folder)


def _arguments(parser: Any) -> None:
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument(
        "--no-peers", action="store_true", help="Conveyor and the bare loop only (no Quix Streams)"
    )
    parser.add_argument(
        "--sides",
        help="measure only these sides, comma-separated (of: " + ", ".join(SIDES) + ")",
    )


def main() -> None:
    bench = Bench(
        "stateful",
        __doc__ or "",
        _arguments,
    )
    count: int = bench.args.messages
    scratch = Path(tempfile.mkdtemp(prefix="conveyor-bench-state-"))
    sides = list(SIDES)
    if bench.args.sides:
        sides = [side for side in sides if side in bench.args.sides.split(",")]
    if bench.args.no_peers:
        sides = [side for side in sides if not side.startswith(("quix", "kstreams"))]
    runs: dict[str, list[float]] = {side: [] for side in sides}
    topics = {}
    for side in sides:  # each side on its own topic; each run reads it with a new group
        topics[side] = bench.create_topic(partitions=PARTITIONS)
        fill(bench.bootstrap, topics[side], count)
    bench.console.print(f"filled {len(sides)} topics with {count:,} messages each")
    try:
        for attempt in range(1, bench.repeats + 1):
            for side in sides:
                folder = scratch / f"{side}-{attempt}"
                runs[side].append(_measure(bench, side, topics[side], count, folder))
                shutil.rmtree(folder, ignore_errors=True)
            bench.console.print(
                f"  run {attempt}/{bench.repeats}: "
                + ", ".join(f"{side} {runs[side][-1]:,.0f}" for side in sides)
                + " msgs/s"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    note = f"{count:,} x 100 B, {KEYS:,} keys, {PARTITIONS} partitions"
    figures = [
        ("bare loop: a dict, its changelog and a rocksdict write batch per batch (baseline)",
         "bare", None),
        ("count per key with changelog (target >= 0.7x the bare loop; >= 500,000)",
         "conveyor", "bare"),
        ("count per key, flushed each batch (state_flush_interval=0) vs the bare loop",
         "per-batch", "bare"),
        ("count per key with changelog vs Quix Streams (target >= 5x)", "conveyor", "quix"),
        ("Quix Streams count per key", "quix", None),
        ("count per key with changelog vs Kafka Streams", "conveyor", "kstreams"),
        ("Kafka Streams count per key", "kstreams", None),
        ("exactly-once count per key vs at least once (target >= 0.6x)", "eos", "conveyor"),
        ("exactly-once count per key, a transaction per batch (transaction_interval=0), vs at "
         "least once", "eos-per-batch", "conveyor"),
        ("1 s tumbling window count per key (target >= 400,000)", "window", None),
        ("1 s tumbling window count per key vs Quix Streams (target >= 5x)",
         "window", "quix-window"),
        ("Quix Streams 1 s tumbling window count", "quix-window", None),
        ("1 s tumbling window count per key vs Kafka Streams", "window", "kstreams-window"),
        ("Kafka Streams 1 s tumbling window count", "kstreams-window", None),
    ]  # fmt: skip
    for title, side, against in figures:
        if side not in runs or (against and against not in runs):
            continue
        bench.record(
            Figure(bench.name, title, "msgs/s", runs[side],
                   runs[against] if against else [], note=note)
        )  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
