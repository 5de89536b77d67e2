"""PostgreSQL change data capture on a connect worker, against a real PostgreSQL with
``wal_level=logical`` and the real broker: the snapshot of the rows there first, then each
insert, update and delete in commit order with a transaction's changes together, keys from
the primary key, a schema change announced, and the stream resumed after a restart with
nothing twice."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from connect_workers import Worker, eventually
from helpers import read_to_end


def changes(bootstrap: str, topic: str) -> list[tuple[Any, Any]]:
    """(key, value) of every committed record of ``topic``, JSON decoded (``None``: a tombstone)."""
    try:
        records = read_to_end(bootstrap, topic, timeout=30)
    except Exception:
        return []  # not made yet
    return [
        (json.loads(r.key()) if r.key() else None, json.loads(r.value()) if r.value() else None)
        for r in records
    ]


def compact(found: list[tuple[Any, Any]]) -> list[tuple[Any, ...]]:
    """Each record as (key id, op, before, after) (a tombstone: (key id, None))."""
    out: list[tuple[Any, ...]] = []
    for key, value in found:
        if value is None:
            out.append((key["id"], None))
        else:
            out.append((key["id"], value["op"], value["before"], value["after"]))
    return out


def test_cdc_snapshots_then_streams_each_change_once_in_commit_order(
    worker: Worker, kafka_bootstrap: str, postgres_dsn: str
) -> None:
    table = f"orders_{uuid.uuid4().hex[:8]}"
    prefix = f"cdc{uuid.uuid4().hex[:6]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, amount int, note text)")
        db.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")  # before images of updates
        db.execute(f"INSERT INTO {table} VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, null)")
    client = worker.client
    client.create_connector(
        {
            "name": f"pg-{prefix}",
            "config": {
                "connector.class": "PostgresCdc",
                "database.url": postgres_dsn,
                "topic.prefix": prefix,
                "table.include.list": f"public.{table}",
            },
        }
    )
    topic = f"{prefix}.public.{table}"
    snapshot = [
        (1, "r", None, {"id": 1, "amount": 10, "note": "a"}),
        (2, "r", None, {"id": 2, "amount": 20, "note": "b"}),
        (3, "r", None, {"id": 3, "amount": 30, "note": None}),
    ]
    eventually(
        lambda: sorted(compact(changes(kafka_bootstrap, topic))) == snapshot, what="the snapshot"
    )
    with psycopg.connect(postgres_dsn) as db:  # one transaction
        db.execute(f"INSERT INTO {table} VALUES (4, 40, 'd')")
        db.execute(f"UPDATE {table} SET amount = 11 WHERE id = 1")
        db.execute(f"DELETE FROM {table} WHERE id = 2")
    streamed = [
        (4, "c", None, {"id": 4, "amount": 40, "note": "d"}),
        (1, "u", {"id": 1, "amount": 10, "note": "a"}, {"id": 1, "amount": 11, "note": "a"}),
        (2, "d", {"id": 2, "amount": 20, "note": "b"}, None),
        (2, None),
    ]
    eventually(lambda: compact(changes(kafka_bootstrap, topic))[3:] == streamed, what="the changes")
    [first_change] = [v for _, v in changes(kafka_bootstrap, topic)[3:4]]
    assert first_change["source"]["table"] == table
    assert first_change["source"]["txId"] is not None

    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"ALTER TABLE {table} ADD COLUMN paid bool")
        db.execute(f"INSERT INTO {table} VALUES (5, 50, 'e', true)")
    eventually(
        lambda: (
            compact(changes(kafka_bootstrap, topic))[-1]
            == (5, "c", None, {"id": 5, "amount": 50, "note": "e", "paid": True})
        ),
        what="a row with the new column",
    )
    announced = changes(kafka_bootstrap, f"{prefix}.schema_changes")
    [change] = [value for _, value in announced if value.get("table") == table]
    assert [c["name"] for c in change["columns"]] == ["id", "amount", "note", "paid"]
    assert change["previous"] == ["id", "amount", "note"]

    client.restart_connector(f"pg-{prefix}", include_tasks=True)
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"UPDATE {table} SET note = 'z' WHERE id = 3")
    eventually(
        lambda: compact(changes(kafka_bootstrap, topic))[-1][:2] == (3, "u"),
        what="a change after the restart",
    )
    found = compact(changes(kafka_bootstrap, topic))
    assert len(found) == len(snapshot) + len(streamed) + 2, "nothing twice"
    keys = [key for key, _ in changes(kafka_bootstrap, topic)]
    assert all(key == {"id": key["id"]} for key in keys), "keyed by the primary key alone"
    client.delete_connector(f"pg-{prefix}")


def _task_on_new_table(
    dsn: str, server: str, *statements: str, snapshot: bool, batch_size: int, tombstones: bool
) -> tuple[str, Callable[[], Any]]:
    """A table of its own, made by ``statements`` (``{t}``: its name), and a factory of CDC
    tasks on it (slot and publication named after it, see :func:`_drop_slot`)."""
    from conveyor.connect.sources.postgres import PostgresChanges  # noqa: PLC0415

    table = f"{server}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as db:
        for statement in statements:
            db.execute(statement.format(t=table))

    def task() -> PostgresChanges:
        name = f"conveyor_{table}"
        return PostgresChanges(
            dsn, server, [f"public.{table}"], name, name,
            snapshot=snapshot, batch_size=batch_size, tombstones=tombstones,
        )  # fmt: skip

    return table, task


def _drop_slot(dsn: str, table: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("SELECT pg_drop_replication_slot(%s)", (f"conveyor_{table}",))


def test_a_task_restarted_ahead_of_its_slot_skips_what_kafka_has_already(
    postgres_dsn: str,
) -> None:
    """Kafka's committed offset can be ahead of what the slot was told (killed between the
    commit and the confirmation): PostgreSQL resends from the slot, the task skips what the
    offset says was written."""
    from conveyor.connect.runtime.plugins import SourceOffsets  # noqa: PLC0415

    table, task = _task_on_new_table(
        postgres_dsn, "skip", "CREATE TABLE {t} (id int PRIMARY KEY)",
        snapshot=False, batch_size=100, tombstones=False,
    )  # fmt: skip

    first = task()
    first.start(SourceOffsets())
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        for key in range(3):
            db.execute(f"INSERT INTO {table} VALUES ({key})")
    polled: list[Any] = []
    eventually(lambda: polled.extend(first.poll(0.5)) or len(polled) == 3, what="3 changes")
    first.stop()  # never confirmed: the slot still starts before all three
    second = task()
    second.start(SourceOffsets({'{"server":"skip"}': polled[1].source_offset}))
    again: list[Any] = []
    eventually(lambda: again.extend(second.poll(0.5)) or len(again) >= 1, what="a change")
    second.stop()
    assert [json.loads(r.key)["id"] for r in again] == [2]
    _drop_slot(postgres_dsn, table)


def test_a_snapshot_cut_short_resumes_after_its_last_row_with_each_change_once(
    postgres_dsn: str,
) -> None:
    """A task stopped after two of its snapshot's batches were written (a third read, never
    written): its successor reads the rest as of a newer snapshot and streams from the first
    one's LSN, so rows changed in between, on either side of the cut, come exactly once: an
    update's version is always one more than the last one written, an insert or a snapshot
    read never meets a key already there, a row whose key moved across the cut is deleted
    under its old one, and the rows in Kafka end as the table's."""
    from conveyor.connect.runtime.plugins import SourceOffsets  # noqa: PLC0415

    table, task = _task_on_new_table(
        postgres_dsn, "resume",
        "CREATE TABLE {t} (id int PRIMARY KEY, version int, note text)",
        "ALTER TABLE {t} REPLICA IDENTITY FULL",
        "INSERT INTO {t} SELECT g, 0, 'n' || g FROM generate_series(1, 600) g",
        snapshot=True, batch_size=50, tombstones=True,
    )  # fmt: skip

    def change(*statements: str) -> None:
        with psycopg.connect(postgres_dsn) as db:  # one transaction
            for statement in statements:
                db.execute(statement.format(t=table))

    first = task()
    first.start(SourceOffsets())
    written = first.poll(1) + first.poll(1)
    first.poll(1)  # read, but the task stops before its transaction: never written
    first.stop()
    read = {json.loads(r.key)["id"] for r in written}
    assert len(read) == 100
    before, after = sorted(read)[:2], sorted(set(range(1, 601)) - read)[:2]
    # between the two snapshots: rows on both sides of the cut change, come and go
    for key in (*before, *after):
        change(f"UPDATE {{t}} SET version = version + 1 WHERE id = {key}")
    change(f"DELETE FROM {{t}} WHERE id = {before[1]}", f"DELETE FROM {{t}} WHERE id = {after[1]}")
    change("INSERT INTO {t} VALUES (0, 0, 'before'), (9999, 0, 'after')")
    moved = sorted(read)[2]  # read before the cut, its new key after it
    change(f"UPDATE {{t}} SET id = 99999 WHERE id = {moved}")

    second = task()
    second.start(SourceOffsets({'{"server":"resume"}': written[-1].source_offset}))
    records = written + second.poll(1)
    # after the second snapshot began: changes to rows it has read and rows it has not
    change(f"UPDATE {{t}} SET version = version + 1 WHERE id IN ({before[0]}, {after[0]}, 0, 9999)")

    def final() -> dict[int, dict[str, Any]]:
        with psycopg.connect(postgres_dsn) as db:
            rows = db.execute(f"SELECT id, version, note FROM {table}").fetchall()
        return {i: {"id": i, "version": v, "note": n} for i, v, n in rows}

    expected = final()
    state: dict[int, dict[str, Any]] = {}

    def fold(batch: list[Any]) -> bool:
        for record in batch:
            if record.value is None:
                assert json.loads(record.key)["id"] not in state, "a tombstone after its delete"
                continue
            value = json.loads(record.value)
            if "op" not in value:
                continue  # the snapshot's end
            op, row = value["op"], value["after"] or value["before"]
            key = row["id"]
            assert key == json.loads(record.key)["id"]
            if op in ("r", "c"):
                assert key not in state, f"{op} of {key} twice"
                state[key] = value["after"]
            elif op == "u":
                assert value["after"]["version"] == state[key]["version"] + 1, f"{key} twice"
                state[key] = value["after"]
            else:
                assert op == "d"
                del state[key]
        return state == expected

    try:
        fold(records)
        eventually(lambda: fold(second.poll(0.5)), 60, "the table's rows, each change once")
    finally:
        second.stop()
        _drop_slot(postgres_dsn, table)


def test_a_task_without_a_snapshot_that_wrote_nothing_keeps_its_slots_changes(
    postgres_dsn: str,
) -> None:
    """No snapshot: the slot made at the first start holds the changes from then on, so a task
    that stopped before writing any record is followed by one that streams them from the
    slot (not by a new slot, made after them)."""
    from conveyor.connect.runtime.plugins import SourceOffsets  # noqa: PLC0415

    table, task = _task_on_new_table(
        postgres_dsn, "noshot", "CREATE TABLE {t} (id int PRIMARY KEY)",
        snapshot=False, batch_size=100, tombstones=False,
    )  # fmt: skip

    first = task()
    first.start(SourceOffsets())
    first.stop()  # nothing polled, nothing written
    with psycopg.connect(postgres_dsn, autocommit=True) as db:
        db.execute(f"INSERT INTO {table} VALUES (1), (2)")
    second = task()
    second.start(SourceOffsets())
    polled: list[Any] = []
    try:
        eventually(lambda: polled.extend(second.poll(0.5)) or len(polled) >= 2, 30, "2 inserts")
    finally:
        second.stop()
        _drop_slot(postgres_dsn, table)
    assert [json.loads(r.key)["id"] for r in polled] == [1, 2]
