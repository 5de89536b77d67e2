"""Change data capture under faults: row changes (inserts, updates, deletes, in transactions
of 1 to 40) arrive exactly once and in commit order while the worker running the task is
SIGKILLed twice (another worker of the cluster takes the task over each time) and the
database restarts once, read back ``read_committed`` and compared record for record.

The suite writes ``CDC_CHANGES`` changes (20,000); the issue's long form is 100,000::

    CDC_CHANGES=100000 make pytest ARGS=tests/integration/connect/test_postgres_cdc_faults.py
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from connect_workers import Worker, delete_cluster_topics, eventually
from conveyor import Admin
from helpers import read_to_end

CHANGES = int(os.environ.get("CDC_CHANGES", "20000"))
RATE = max(CHANGES / 20, 1000)  # changes a second: the faults land while changes flow


class Writer(threading.Thread):
    """Writes ``total`` row changes in transactions, keeping what each one should become in
    Kafka in commit order; :attr:`written` counts the changes committed, :attr:`hold` pauses
    it between two transactions until :attr:`resume` (for the database's restart)."""

    def __init__(self, dsn: str, table: str, total: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.table, self.total = dsn, table, total
        self.expected: list[tuple[Any, ...]] = []
        self.written = 0
        self.hold = threading.Event()
        self.held = threading.Event()
        self.resume = threading.Event()
        self.failure: BaseException | None = None
        self.progress = threading.Condition()

    def run(self) -> None:
        began = time.monotonic()
        paced = threading.Event()  # never set: waits out the pace
        rng = random.Random(11)
        rows: dict[int, int] = {}
        next_id = 0
        try:
            while self.written < self.total:
                if self.hold.is_set():
                    self.held.set()
                    if not self.resume.wait(300):
                        raise TimeoutError("the writer was never resumed")
                    self.hold.clear()
                with psycopg.connect(self.dsn) as db:
                    for _ in range(50):  # 50 transactions per connection
                        planned, changes = dict(rows), []
                        for _ in range(min(rng.randint(1, 40), self.total - self.written)):
                            roll = rng.random()
                            if roll < 0.5 or len(planned) < 10:
                                key, value = next_id, rng.randint(0, 999)
                                next_id += 1
                                db.execute(
                                    f"INSERT INTO {self.table} VALUES (%s, %s)", (key, value)
                                )
                                changes.append((key, "c", {"id": key, "v": value}))
                                planned[key] = value
                            elif roll < 0.8:
                                key = rng.choice(list(planned))
                                value = rng.randint(0, 999)
                                db.execute(
                                    f"UPDATE {self.table} SET v = %s WHERE id = %s", (value, key)
                                )
                                changes.append((key, "u", {"id": key, "v": value}))
                                planned[key] = value
                            else:
                                key = rng.choice(list(planned))
                                db.execute(f"DELETE FROM {self.table} WHERE id = %s", (key,))
                                changes.append((key, "d", None))
                                changes.append((key, None, None))  # its tombstone
                                del planned[key]
                        db.commit()
                        rows = planned
                        with self.progress:
                            self.expected.extend(changes)
                            self.written += sum(1 for change in changes if change[1] is not None)
                            self.progress.notify_all()
                        if self.written >= self.total or self.hold.is_set():
                            break
                        paced.wait(began + self.written / RATE - time.monotonic())
        except BaseException as error:
            self.failure = error
            with self.progress:
                self.progress.notify_all()

    def wait_for(self, count: int) -> None:
        with self.progress:
            assert self.progress.wait_for(
                lambda: self.written >= count or self.failure is not None, timeout=300
            ), f"the writer wrote {self.written} of {count}"
        assert self.failure is None, repr(self.failure)


def owner_of(workers: list[Worker], name: str) -> Worker:
    """The worker that runs the connector's task now."""

    def running() -> Worker | None:
        for worker in workers:
            if worker.process.poll() is not None:
                continue
            try:
                [task] = worker.client.get_connector_status(name)["tasks"]
            except Exception:
                continue
            if task["state"] == "RUNNING":
                return next(
                    (
                        w
                        for w in workers
                        if task["worker_id"] == f"127.0.0.1:{w.port}" and w.process.poll() is None
                    ),
                    None,
                )
        return None

    found: Worker = eventually(running, timeout=120, what=f"{name}'s task running")
    return found


def cdc_connector(name: str, dsn: str, prefix: str, table: str, batch: int) -> dict[str, Any]:
    """A PostgresCdc connector of ``table``, ``batch`` rows a poll at most."""
    config = {
        "connector.class": "PostgresCdc",
        "database.url": dsn,
        "topic.prefix": prefix,
        "batch.size": str(batch),
        "table.include.list": f"public.{table}",
    }
    return {"name": name, "config": config}


def records(bootstrap: str, topic: str) -> list[tuple[Any, ...]]:
    out = []
    for record in read_to_end(bootstrap, topic, timeout=120):
        key = json.loads(record.key())["id"]
        if record.value() is None:
            out.append((key, None, None))
        else:
            value = json.loads(record.value())
            out.append((key, value["op"], value["after"]))
    return out


def test_row_changes_arrive_once_in_commit_order_through_sigkills_and_a_database_restart(
    kafka_bootstrap: str, postgres_server: Any, tmp_path: Path
) -> None:
    table = f"items_{uuid.uuid4().hex[:8]}"
    prefix = f"faults{uuid.uuid4().hex[:6]}"
    name = f"pg-{prefix}"
    group = f"connect-{uuid.uuid4().hex[:8]}"
    dsn = postgres_server.dsn
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v int)")
    workers = [Worker(kafka_bootstrap, group, tmp_path) for _ in range(2)]
    writer = Writer(dsn, table, CHANGES)
    try:
        workers[0].client.create_connector(cdc_connector(name, dsn, prefix, table, 500))
        owner_of(workers, name)
        writer.start()
        for fault, at in (("kill", 0.25), ("restart", 0.5), ("kill", 0.75)):
            writer.wait_for(int(CHANGES * at))
            if fault == "kill":
                doomed = owner_of(workers, name)
                doomed.kill()
                workers.append(Worker(kafka_bootstrap, group, tmp_path))
                owner_of(workers, name)  # taken over by another worker
            else:
                writer.hold.set()
                assert writer.held.wait(60), "the writer did not pause"
                postgres_server.restart()
                writer.resume.set()
        writer.wait_for(CHANGES)
        writer.join(60)
        topic = f"{prefix}.public.{table}"
        expected = writer.expected
        eventually(
            lambda: len(records(kafka_bootstrap, topic)) >= len(expected),
            timeout=300,
            what=f"{len(expected)} records",
        )
        assert records(kafka_bootstrap, topic) == expected, "once each, in commit order"
    finally:
        writer.resume.set()
        for worker in workers:
            if worker.process.poll() is None:
                worker.stop(timeout=90)
        delete_cluster_topics(kafka_bootstrap, group)


def test_a_snapshot_whose_worker_is_killed_midway_is_finished_by_another_exactly_once(
    kafka_bootstrap: str, postgres_server: Any, tmp_path: Path
) -> None:
    """The worker reading a 100,000-row snapshot is SIGKILLed partway while rows change; the
    other worker resumes the snapshot after its last row written, and the rows in Kafka
    (``read_committed``) end as the table's with every row read once and every update once
    (each one's version one more than the last written)."""
    table = f"snap_{uuid.uuid4().hex[:8]}"
    prefix = f"snap{uuid.uuid4().hex[:6]}"
    name = f"pg-{prefix}"
    group = f"connect-{uuid.uuid4().hex[:8]}"
    dsn = postgres_server.dsn
    rows = 100_000
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, version int)")
        db.execute(f"INSERT INTO {table} SELECT g, 0 FROM generate_series(1, {rows}) g")
    workers = [Worker(kafka_bootstrap, group, tmp_path) for _ in range(2)]
    topic = f"{prefix}.public.{table}"
    stop = threading.Event()
    updates = [0]

    def update() -> None:  # a transaction of 5 updates every 20 ms, on random rows
        rng = random.Random(5)
        with psycopg.connect(dsn) as db:
            while not stop.wait(0.02):
                for key in rng.sample(range(1, rows + 1), 5):
                    db.execute(f"UPDATE {table} SET version = version + 1 WHERE id = %s", (key,))
                db.commit()
                updates[0] += 5

    updater = threading.Thread(target=update, daemon=True)
    try:
        workers[0].client.create_connector(cdc_connector(name, dsn, prefix, table, 100))
        updater.start()
        doomed = owner_of(workers, name)
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:

            def written() -> int:
                try:
                    return sum(admin.read_watermark_offsets(topic, p)[1] for p in (0,))
                except Exception:
                    return 0

            eventually(lambda: written() >= 5_000, timeout=120, what="5,000 snapshot rows")
            doomed.kill()
            assert written() < rows, "killed before the snapshot's end"
        owner_of(workers, name)  # taken over by the other worker
        eventually(lambda: updates[0] >= 500, timeout=60, what="500 updates")
        stop.set()
        updater.join(30)
        with psycopg.connect(dsn) as db:
            expected = dict(db.execute(f"SELECT id, version FROM {table}").fetchall())

        def folded() -> dict[int, int] | None:
            state: dict[int, int] = {}
            for record in read_to_end(kafka_bootstrap, topic, timeout=120):
                value = json.loads(record.value())
                key, after = value["after"]["id"], value["after"]["version"]
                if value["op"] == "r":
                    assert key not in state, f"row {key} read twice"
                else:
                    assert value["op"] == "u", value
                    assert after == state[key] + 1, f"an update of {key} twice, or lost"
                state[key] = after
            return state if state == expected else None

        eventually(folded, timeout=180, what="the table's rows, each change once")
    finally:
        stop.set()
        for worker in workers:
            if worker.process.poll() is None:
                worker.stop(timeout=90)
        delete_cluster_topics(kafka_bootstrap, group)
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (f"conveyor_{name.replace('-', '_')}",),
            )
