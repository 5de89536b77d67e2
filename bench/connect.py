"""Source connectors beside Kafka Connect: PostgreSQL change data capture (Conveyor's
``PostgresCdc`` on ``conveyor connect worker`` against Debezium 3.6.1.Final's
``PostgresConnector`` on Kafka Connect 4.1.1) and a file's lines (Conveyor's
``FileStreamSource`` against Kafka Connect's).

Both sides run on this machine's broker and one PostgreSQL (``wal_level=logical``), each
variant on tables and topics of its own, exactly-once on both (Conveyor's default; the Connect
worker with ``exactly.once.source.support=enabled``), JSON without schemas on both, each
side's other settings its defaults (Debezium: ``pgoutput``, ``poll.interval.ms`` 500,
``max.batch.size`` 2048).

Figures (medians of ``--repeats`` runs, the sides alternating):

* change-to-Kafka latency at 1,000 and 10,000 changes/s (``--seconds`` each, after a 2 s
  warm-up that is not measured): rows inserted by a writer process in transactions of 1 ms of
  rows, each stamped with the microsecond it was written; a ``read_committed`` reader takes
  each change's latency when it reads it, p50 and p99. Target: p50 <= Debezium's.
* snapshot: ``--rows`` rows of about 100 bytes already in a table when the connector is made,
  until the last of them was read from Kafka, rows/s. Target >= 1x Debezium.
* a file's lines: ``--lines`` lines of 100 bytes read into a topic, lines/s, beside Kafka
  Connect's FileStreamSource.

``--tuned`` adds Debezium with ``poll.interval.ms=10`` to the latency figures (Conveyor has no
poll interval: a poll returns the transactions read as soon as they were read). ``--no-peers``
runs Conveyor alone (the test suite's short form).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer as KafkaConsumer

from _kafka_connect import ConnectJvm, RestWorker
from _postgres import free_port, postgres_cluster
from conveyor import Admin
from harness import Bench, Figure

HERE = Path(__file__).resolve().parent
WARM_UP = 2.0
PREFIXES: list[str] = []  # of the topics the runs made, deleted at the end


class ConveyorWorker(RestWorker):
    """``conveyor connect worker`` in a process of its own."""

    def __init__(self, bootstrap: str, port: int, group: str) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.group = group
        env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "connect", "worker", "--port", str(port),
             "--group", group, "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        self.wait_ready(120, lambda: "conveyor connect worker exited")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


def cdc_config(side: str, dsn: str, name: str, prefix: str, table: str) -> dict[str, Any]:
    if side == "conveyor":
        return {"connector.class": "PostgresCdc", "database.url": dsn, "topic.prefix": prefix,
                "table.include.list": f"public.{table}"}  # fmt: skip
    port = dsn.rsplit(":", 1)[1].split("/", maxsplit=1)[0]
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput", "database.hostname": "127.0.0.1", "database.port": port,
        "database.user": "conveyor", "database.dbname": "postgres", "topic.prefix": prefix,
        "table.include.list": f"public.{table}", "slot.name": name.replace("-", "_"),
        "publication.name": name.replace("-", "_"), "publication.autocreate.mode": "filtered",
        "exactly.once.support": "required", "tasks.max": "1",
        "topic.creation.default.partitions": "1", "topic.creation.default.replication.factor": "1",
        **({"poll.interval.ms": "10"} if side == "debezium-10ms" else {}),
    }  # fmt: skip


def _reader(bootstrap: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False,
         "isolation.level": "read_committed", "fetch.wait.max.ms": 5,
         "topic.metadata.refresh.interval.ms": 500},
    )  # fmt: skip
    consumer.subscribe([topic])
    return consumer


def slot_of(side: str, name: str) -> str:
    """The replication slot each side's connector ``name`` makes."""
    if side == "conveyor":
        return re.sub(r"[^a-z0-9_]", "_", f"conveyor_{name}".lower())
    return name.replace("-", "_")


def drop_slot(dsn: str, slot: str) -> None:
    """Drop a deleted connector's slot once its task let it go (slots are few, and hold WAL)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as db:
        while time.monotonic() < deadline:
            row = db.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            if row is None:
                return
            if not row[0]:
                db.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            time.sleep(0.2)
    raise RuntimeError(f"the slot {slot} stayed active")


def latency(
    worker: Any, side: str, bootstrap: str, dsn: str, rate: int, seconds: float
) -> tuple[float, float]:
    """p50 and p99 (ms) of the changes written at ``rate`` for ``seconds``."""
    token = uuid.uuid4().hex[:8]
    table, prefix, name = f"lat_{token}", f"benchlat{token}", f"lat-{side}-{token}"
    PREFIXES.append(prefix)
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, t_us bigint, payload text)")
    worker.create(name, cdc_config(side, dsn, name, prefix, table))
    topic = f"{prefix}.public.{table}"
    consumer = _reader(bootstrap, topic)
    samples: list[tuple[int, float]] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as db:  # the stream runs: a first change seen
            db.execute(f"INSERT INTO {table} VALUES (0, 0, 'first')")
        deadline = time.monotonic() + 120
        while not any(True for _ in _read(consumer, 1.0, samples)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side}: no change reached {topic}")
        samples.clear()
        writer = subprocess.Popen(
            [sys.executable, str(HERE / "_cdc_writer.py"), dsn, table, str(rate),
             str(seconds + WARM_UP), "1"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        written = None
        deadline = time.monotonic() + seconds + WARM_UP + 120
        while time.monotonic() < deadline:
            list(_read(consumer, 0.5, samples))
            if written is None and writer.poll() is not None:
                written = int(writer.stdout.read().strip() or 0) if writer.stdout else 0
            if written is not None and len(samples) >= written:
                break
        if written is None or len(samples) < written:
            raise RuntimeError(f"{side}: {len(samples)} of {written} changes read")
    finally:
        consumer.close()
        worker.delete(name)
        drop_slot(dsn, slot_of(side, name))
    start_us = min(stamp for stamp, _ in samples) + int(WARM_UP * 1_000_000)
    measured = sorted(ms for stamp, ms in samples if stamp >= start_us)
    return statistics.median(measured), measured[int(len(measured) * 0.99) - 1]


def _take(consumer: KafkaConsumer, timeout: float) -> list[Any]:
    """The first message the moment it comes (up to ``timeout``), then what is there already."""
    first = consumer.consume(num_messages=1, timeout=timeout)
    return first + consumer.consume(num_messages=1000, timeout=0) if first else []


def _read(consumer: KafkaConsumer, timeout: float, samples: list[tuple[int, float]]) -> Any:
    """Read what came within ``timeout``; each change's (written at, latency ms) to ``samples``.
    The first message is taken the moment it comes (``consume(1, timeout)``), then what is
    there already (``consume(n, 0)``): a wait for a full batch would count in the latency."""
    for message in _take(consumer, timeout):
        now = time.time_ns() // 1000
        if message.error() is not None or message.value() is None:
            continue
        value = json.loads(message.value())
        after = value.get("after") if isinstance(value, dict) else None
        if not after or not after.get("t_us"):
            yield message
            continue
        samples.append((after["t_us"], (now - after["t_us"]) / 1000))
        yield message


def snapshot(worker: Any, side: str, bootstrap: str, dsn: str, rows: int) -> float:
    """Rows/s of the initial snapshot of ``rows`` rows, made to the last row read."""
    token = uuid.uuid4().hex[:8]
    table, prefix, name = f"snap_{token}", f"benchsnap{token}", f"snap-{side}-{token}"
    PREFIXES.append(prefix)
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, t_us bigint, payload text)")
        db.execute(
            f"INSERT INTO {table} SELECT n, 0, repeat('x', 80) FROM generate_series(1, %s) n",
            (rows,),
        )
    consumer = _reader(bootstrap, f"{prefix}.public.{table}")
    began = time.monotonic()
    worker.create(name, cdc_config(side, dsn, name, prefix, table))
    seen, last = 0, began
    deadline = began + 600
    try:
        while seen < rows and time.monotonic() < deadline:
            batch = _take(consumer, 0.5)
            counted = sum(1 for m in batch if m.error() is None and m.value() is not None)
            if counted:
                seen, last = seen + counted, time.monotonic()
    finally:
        consumer.close()
        worker.delete(name)
        drop_slot(dsn, slot_of(side, name))
    if seen < rows:
        raise RuntimeError(f"{side}: {seen} of {rows} snapshot rows read")
    return rows / (last - began)


def file_lines(worker: Any, side: str, bootstrap: str, lines: int, folder: Path) -> float:
    """Lines/s of a file of ``lines`` lines read into a topic (made to the last line read)."""
    token = uuid.uuid4().hex[:8]
    path, topic, name = folder / f"{token}.log", f"file-{side}-{token}", f"file-{side}-{token}"
    line = "y" * 99 + "\n"
    path.write_text(line * lines)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(topic, 1)
    consumer = _reader(bootstrap, topic)
    config = {"connector.class": "FileStreamSource", "file": str(path), "topic": topic}
    if side == "debezium":
        config["connector.class"] = "org.apache.kafka.connect.file.FileStreamSourceConnector"
        config["exactly.once.support"] = "required"
    began = time.monotonic()
    worker.create(name, config)
    seen, last = 0, began
    deadline = began + 600
    try:
        while seen < lines and time.monotonic() < deadline:
            batch = _take(consumer, 0.5)
            counted = sum(1 for m in batch if m.error() is None)
            if counted:
                seen, last = seen + counted, time.monotonic()
    finally:
        consumer.close()
        worker.delete(name)
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.delete_topic(topic)
    if seen < lines:
        raise RuntimeError(f"{side}: {seen} of {lines} lines read")
    return lines / (last - began)


def _arguments(parser: Any) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds a rate")
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the snapshot")
    parser.add_argument("--lines", type=int, default=200_000, help="lines of the file")
    parser.add_argument("--rates", default="1000,10000", help="changes/s, comma-separated")
    parser.add_argument(
        "--no-peers", action="store_true", help="Conveyor only (no Kafka Connect and Debezium)"
    )
    parser.add_argument(
        "--tuned",
        action="store_true",
        help="also Debezium with poll.interval.ms=10 (its default: 500), latency only",
    )


def main() -> None:
    bench = Bench("connect", __doc__ or "", _arguments)
    args = bench.args
    rates = [int(rate) for rate in args.rates.split(",")]
    runs: dict[str, list[float]] = {}
    folder = Path(tempfile.mkdtemp(prefix="conveyor-bench-connect-files-"))
    with postgres_cluster() as dsn:
        group = f"bench-connect-{uuid.uuid4().hex[:6]}"
        sides: dict[str, Any] = {
            "conveyor": ConveyorWorker(bench.bootstrap, free_port(), f"{group}-conveyor")
        }
        if not args.no_peers:
            sides["debezium"] = ConnectJvm(bench.bootstrap, free_port(), f"{group}-connect")
            if args.tuned:
                sides["debezium-10ms"] = sides["debezium"]  # the same worker, its own connectors
        try:
            for attempt in range(1, bench.repeats + 1):
                for side, worker in sides.items():
                    for rate in rates:
                        p50, p99 = latency(worker, side, bench.bootstrap, dsn, rate, args.seconds)
                        runs.setdefault(f"{side}-p50-{rate}", []).append(p50)
                        runs.setdefault(f"{side}-p99-{rate}", []).append(p99)
                    if side == "debezium-10ms":
                        continue  # its latency only: the poll interval changes nothing else
                    runs.setdefault(f"{side}-snapshot", []).append(
                        snapshot(worker, side, bench.bootstrap, dsn, args.rows)
                    )
                    runs.setdefault(f"{side}-file", []).append(
                        file_lines(worker, side, bench.bootstrap, args.lines, folder)
                    )
                bench.console.print(
                    f"  run {attempt}/{bench.repeats}: "
                    + ", ".join(f"{k} {v[-1]:,.2f}" for k, v in runs.items()),
                    highlight=False,
                )
        finally:
            for worker in {id(worker): worker for worker in sides.values()}.values():
                worker.stop()
            with Admin({"bootstrap.servers": bench.bootstrap}) as admin:
                for topic in admin.list_topics():
                    if topic.startswith((group, *PREFIXES)):
                        admin.delete_topic(topic)
    note = f"{args.seconds:.0f} s a rate, {args.rows:,} snapshot rows, {args.lines:,} lines"
    for rate in rates:
        for quantile in ("p50", "p99"):
            target = " (target <= Debezium's)" if quantile == "p50" else ""
            bench.record(
                Figure(bench.name, f"CDC change-to-Kafka latency {quantile} at {rate:,}/s vs "
                       f"Debezium{target}", "ms", runs[f"conveyor-{quantile}-{rate}"],
                       runs.get(f"debezium-{quantile}-{rate}", []), higher_is_better=False,
                       note=note)
            )  # fmt: skip
    for rate in rates:
        if f"debezium-10ms-p50-{rate}" in runs:
            for quantile in ("p50", "p99"):
                bench.record(
                    Figure(bench.name, f"CDC latency {quantile} at {rate:,}/s vs Debezium with "
                           "poll.interval.ms=10", "ms", runs[f"conveyor-{quantile}-{rate}"],
                           runs[f"debezium-10ms-{quantile}-{rate}"], higher_is_better=False,
                           note=note)
                )  # fmt: skip
    bench.record(
        Figure(bench.name, "CDC snapshot vs Debezium (target >= 1x)", "rows/s",
               runs["conveyor-snapshot"], runs.get("debezium-snapshot", []), note=note)
    )  # fmt: skip
    bench.record(
        Figure(bench.name, "a file's lines vs Kafka Connect's FileStreamSource", "lines/s",
               runs["conveyor-file"], runs.get("debezium-file", []), note=note)
    )  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
