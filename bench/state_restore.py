"""Restoring state stores: a cold restore of a changelog beside a bare confluent-kafka restore
loop, Quix Streams and Kafka Streams, and a restart after SIGKILL to the first processed
message, with the local store kept (warm) and deleted (cold).

Data: for each side a compacted changelog of its own, named as that side names its store's,
of ``--records`` records (key ``k-N``, each key once, a 100 B JSON value; the default,
9,000,000, is about 1 GB on the broker's disk) over 4 partitions; Quix's carry the header
naming its column family. The input topic holds a message per partition for each restart.

Figures:

* cold restore, records/s: Conveyor (an app whose local store is empty; its partitions'
  restore seconds from the ``state.restored`` events: one restore thread reads them one after
  another) beside the bare loop (a confluent-kafka consumer with the settings of Conveyor's
  restore reader, one rocksdict write batch per 4 MiB as Conveyor writes them) twice: the
  partitions one after another (as Conveyor), and at once (a thread, a reader and a rocksdict
  each: the most a Python reader gets out of this machine), Quix Streams 3.28 (from its "Beginning recovery check" to
  its "Recovery process complete") and Kafka Streams 4.1.1 (its restore listener's first
  start to last end). Conveyor's seconds run likewise from its first partition's restore
  start to its last one's end. Targets: >= 500,000 records/s, >= 10x Quix Streams, >= 0.8x
  Kafka Streams; the bare loop beside them.
* RSS growth of an app that restored ``--records`` over 64 store partitions (a topic of 64
  partitions and its changelog): the process's resident memory after every partition was
  restored and processed a message, less before the app was built. Target <= 300 MB at 1 GB.
* restart after SIGKILL to the first processed message, seconds from the process's start
  (Python, imports, the group's join with static membership, the restore of the partition
  first processed): warm (the local store kept, only the delta replayed; target <= 7 s) and
  cold (the local store deleted; target <= 30 s at 1 GB).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import rocksdict
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka import Producer as KafkaProducer

from _kafka_streams import kafka_streams_restore
from _peers import peers_python
from conveyor import App, Consumer
from conveyor.state import Store, changelog_topic
from harness import Bench, Figure

HERE = Path(__file__).resolve().parent
PARTITIONS = 4
VALUE = b'"' + b"x" * 98 + b'"'  # 100 B of JSON
RESTORE_BATCH_BYTES = 4 << 20  # what Conveyor's restore writes at once
READER = {  # Conveyor's restore reader (conveyor.state.space)
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
    "fetch.max.bytes": 64 << 20,
    "max.partition.fetch.bytes": 16 << 20,
    "fetch.queue.backoff.ms": 10,
    "enable.auto.commit": False,
}


def fill_changelog(
    bootstrap: str,
    topic: str,
    records: int,
    console: Any,
    headers: Any = None,
    partitions: int = PARTITIONS,
) -> None:
    """``records`` keys once each, round-robin over the partitions (setup, not measured)."""
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000}
    )
    began = time.monotonic()
    for index in range(records):
        while True:
            try:
                producer.produce(
                    topic, VALUE, key=f"k-{index}", partition=index % partitions, headers=headers
                )
                break
            except BufferError:
                producer.poll(0.05)
        if index and index % 1_000_000 == 0:
            console.print(f"  filled {index:,} of {records:,} ({time.monotonic() - began:.0f} s)")
    if producer.flush(300):
        raise RuntimeError("could not fill the changelog")


def bare_restore(bootstrap: str, changelog: str, folder: Path) -> tuple[int, float]:
    """Every partition of ``changelog`` read to its end into a rocksdict, one after another;
    records and seconds."""
    began = time.perf_counter()
    records = _bare_partitions(bootstrap, changelog, range(PARTITIONS), folder)
    return records, time.perf_counter() - began


def bare_restore_at_once(bootstrap: str, changelog: str, folder: Path) -> tuple[int, float]:
    """Every partition of ``changelog`` read to its end at once, a thread, a reader and a
    rocksdict each; records and seconds."""
    counts: list[int] = []
    threads = [
        threading.Thread(
            target=lambda p: counts.append(
                _bare_partitions(bootstrap, changelog, [p], folder / str(p))
            ),
            args=(partition,),
        )
        for partition in range(PARTITIONS)
    ]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(counts) != PARTITIONS:
        raise RuntimeError("a bare restore thread failed")
    return sum(counts), time.perf_counter() - began


def _bare_partitions(bootstrap: str, changelog: str, partitions: Any, folder: Path) -> int:
    db = rocksdict.Rdict(str(folder), rocksdict.Options(raw_mode=True))
    reader = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}", **READER}
    )
    records = 0
    try:
        for partition in partitions:
            reader.assign([TopicPartition(changelog, partition, 0)])
            batch, pending, ended = rocksdict.WriteBatch(raw_mode=True), 0, False
            while not ended:
                for raw in reader.consume(10_000, 1.0):
                    error = raw.error()
                    if error is not None:
                        ended = error.code() == KafkaError._PARTITION_EOF
                        if ended:
                            break
                        continue
                    value = raw.value()
                    batch.put(raw.key(), value)
                    records += 1
                    pending += len(value)
                    if pending >= RESTORE_BATCH_BYTES:
                        db.write(batch)
                        batch, pending = rocksdict.WriteBatch(raw_mode=True), 0
            db.write(batch)
        db.flush()
        return records
    finally:
        reader.close()
        db.close()


def conveyor_restore(bootstrap: str, topic: str, group: str, folder: Path) -> tuple[int, float]:
    """An app whose local store is empty restores every partition; records and seconds from
    the first partition's restore start to the last one's end (its ``state.restored``
    events)."""
    restored: list[tuple[float, Any]] = []
    all_in = threading.Event()

    def seen(event: Any) -> None:
        restored.append((time.monotonic(), event))
        if len(restored) == PARTITIONS:
            all_in.set()

    class Idle(Consumer):
        def consume(self) -> None:
            return None

    app = App(
        client_id="bench-restore",
        kafka={"bootstrap.servers": bootstrap, "group.id": group},
        state_dir=folder,
        max_wait_time=0.05,
    )
    app.routes.topic(topic, Idle, state=Store())
    app.monitor.subscribe("state.restored", seen)
    app.start()
    try:
        if not all_in.wait(600):
            raise RuntimeError(f"only {len(restored)} of {PARTITIONS} partitions restored")
    finally:
        app.stop_and_wait()
    began = min(at - event["seconds"] for at, event in restored)
    return sum(event["records"] for _, event in restored), max(at for at, _ in restored) - began


def quix_restore(bootstrap: str, topic: str, group: str, folder: Path) -> float:
    """Quix Streams' restore of its count store, in the peers' environment: seconds."""
    done = subprocess.run(
        [peers_python(), str(HERE / "_state_quix.py"), bootstrap, topic, "0", "restore",
         str(folder), group],
        capture_output=True, text=True, timeout=1800, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Quix Streams failed: {done.stderr[-2000:]}")
    return float(json.loads(lines[-1])["seconds"])


def conveyor_rss(bench: Bench, records: int, folder: Path) -> float:
    """An app (``_state_rss.py``, a process of its own) restores ``records`` over 64 store
    partitions, and each partition processes a message: its resident memory's growth, MB."""
    partitions = 64
    topic = bench.create_topic(partitions)
    group = f"bench-rss-{uuid.uuid4().hex[:8]}"
    changelog = bench.create_topic(
        partitions, {"cleanup.policy": "compact"}, name=changelog_topic(group, topic, "default")
    )
    fill_changelog(bench.bootstrap, changelog, records, bench.console, partitions=partitions)
    producer = KafkaProducer({"bootstrap.servers": bench.bootstrap})
    for partition in range(partitions):
        producer.produce(topic, b"1", key=b"rss", partition=partition)
    producer.flush(30)
    done = subprocess.run(
        [sys.executable, str(HERE / "_state_rss.py"), bench.bootstrap, topic, group,
         str(folder), str(partitions)],
        capture_output=True, text=True, timeout=1200, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the RSS app failed: {done.stderr[-2000:]}")
    return float(json.loads(lines[-1])["mb"])


class Restarts:
    """The app of ``bench/_state_app.py`` started, killed and started again on one folder."""

    def __init__(self, bench: Bench, topic: str, group: str, folder: Path) -> None:
        self.bench, self.topic, self.group, self.folder = bench, topic, group, folder
        self.process: subprocess.Popen[str] | None = None
        self.producer = KafkaProducer({"bootstrap.servers": bench.bootstrap})

    def start(self) -> float:
        """A message for each partition, then the app: seconds to its first processed one."""
        for partition in range(PARTITIONS):
            self.producer.produce(self.topic, b"1", key=b"restart", partition=partition)
        self.producer.flush(30)
        began = time.time()
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "_state_app.py"), self.bench.bootstrap, self.topic,
             self.group, str(self.folder)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert self.process.stdout is not None
        for line in self.process.stdout:  # ends when the process does
            if line.startswith("{"):
                return float(json.loads(line)["first"]) - began
        raise RuntimeError(f"the app ended ({self.process.wait()}) before processing anything")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)


def _arguments(parser: Any) -> None:
    parser.add_argument("--records", type=int, default=9_000_000)
    parser.add_argument("--no-peers", action="store_true", help="Conveyor and the bare loop only")
    parser.add_argument("--no-rss", action="store_true", help="skip the 64 partitions' RSS")


def main() -> None:
    bench = Bench("state_restore", __doc__ or "", _arguments)
    records: int = bench.args.records
    peers = not bench.args.no_peers
    scratch = Path(tempfile.mkdtemp(prefix="conveyor-bench-restore-"))
    compact = {"cleanup.policy": "compact"}
    topic = bench.create_topic(PARTITIONS)
    group = f"bench-restore-{uuid.uuid4().hex[:8]}"
    changelogs = {  # each side's own, named as it names its store's
        "bare": bench.create_topic(PARTITIONS, compact),
        "bare-at-once": bench.create_topic(PARTITIONS, compact),
        "conveyor": bench.create_topic(
            PARTITIONS, compact, name=changelog_topic(group, topic, "default")
        ),
    }
    if peers:
        changelogs["quix"] = bench.create_topic(
            PARTITIONS, compact, name=f"changelog__{group}-quix--{topic}--default"
        )
        changelogs["kstreams"] = bench.create_topic(
            PARTITIONS, compact, name=f"{group}-kstreams-counts-changelog"
        )
    for side, changelog in changelogs.items():
        headers = [("__column_family__", b"default")] if side == "quix" else None
        fill_changelog(bench.bootstrap, changelog, records, bench.console, headers)
    bench.console.print(f"filled {len(changelogs)} changelogs with {records:,} records each")
    rates: dict[str, list[float]] = {side: [] for side in changelogs}
    warm, cold = [], []
    try:
        for attempt in range(1, bench.repeats + 1):
            folder = scratch / f"bare-{attempt}"
            count, seconds = bare_restore(bench.bootstrap, changelogs["bare"], folder)
            rates["bare"].append(count / seconds)
            shutil.rmtree(folder, ignore_errors=True)
            folder = scratch / f"bare-at-once-{attempt}"
            count, seconds = bare_restore_at_once(
                bench.bootstrap, changelogs["bare-at-once"], folder
            )
            rates["bare-at-once"].append(count / seconds)
            shutil.rmtree(folder, ignore_errors=True)
            if peers:
                folder = scratch / f"quix-{attempt}"
                rates["quix"].append(
                    records / quix_restore(bench.bootstrap, topic, f"{group}-quix", folder)
                )
                shutil.rmtree(folder, ignore_errors=True)
                folder = scratch / f"kstreams-{attempt}"
                count, seconds = kafka_streams_restore(
                    bench.bootstrap, topic, f"{group}-kstreams", PARTITIONS, folder
                )
                rates["kstreams"].append(count / seconds)
                shutil.rmtree(folder, ignore_errors=True)
            folder = scratch / f"conveyor-{attempt}"
            count, seconds = conveyor_restore(bench.bootstrap, topic, group, folder)
            rates["conveyor"].append(count / seconds)
            restarts = Restarts(bench, topic, group, folder)  # the folder holds the store: warm
            try:
                restarts.start()
                restarts.kill()
                warm.append(restarts.start())
                restarts.kill()
                shutil.rmtree(folder)
                cold.append(restarts.start())
            finally:
                restarts.kill()
                shutil.rmtree(folder, ignore_errors=True)
            bench.console.print(
                f"  run {attempt}/{bench.repeats}: "
                + ", ".join(f"{side} {rate[-1]:,.0f}" for side, rate in rates.items())
                + f" records/s; restart warm {warm[-1]:.2f} s, cold {cold[-1]:.2f} s"
            )
        growth = [] if bench.args.no_rss else [conveyor_rss(bench, records, scratch / "rss")]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    note = f"{records:,} x 100 B, {PARTITIONS} partitions"
    figures = [
        ("bare restore loop, partitions one after another", "bare", None),
        ("bare restore loop, partitions at once", "bare-at-once", None),
        ("cold restore (target >= 500,000) vs the bare loop", "conveyor", "bare"),
        ("cold restore vs the bare loop, partitions at once", "conveyor", "bare-at-once"),
        ("cold restore vs Quix Streams (target >= 10x)", "conveyor", "quix"),
        ("Quix Streams restore", "quix", None),
        ("cold restore vs Kafka Streams (target >= 0.8x)", "conveyor", "kstreams"),
        ("Kafka Streams restore", "kstreams", None),
    ]
    for title, side, against in figures:
        if side in rates and (against is None or against in rates):
            baseline = rates[against] if against else []
            bench.record(Figure(bench.name, title, "records/s", rates[side], baseline, note=note))
    if growth:
        bench.record(
            Figure(bench.name, "RSS growth, 64 store partitions (target <= 300 MB at 1 GB)",
                   "MB", growth, higher_is_better=False,
                   note=f"{records:,} x 100 B, 64 partitions, one run")
        )  # fmt: skip
    bench.record(
        Figure(bench.name, "restart after SIGKILL to the first processed message, warm"
               " (target <= 7 s)", "s", warm, higher_is_better=False, note=note)
    )  # fmt: skip
    bench.record(
        Figure(bench.name, "restart after SIGKILL to the first processed message, cold"
               " (target <= 30 s at 1 GB)", "s", cold, higher_is_better=False, note=note)
    )  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
