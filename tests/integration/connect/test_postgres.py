"""The PostgreSQL sink against a real PostgreSQL (a throwaway cluster) and the real broker."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conveyor import App
from conveyor.connect.sinks import Postgres
from helpers import Record, running
from integration.connect.test_sinks import produce_keyed

pytestmark = pytest.mark.xdist_group("postgres")  # xdist: see tests/conftest.py


def test_64_lanes_store_every_record_once_in_order_per_key(
    kafka_bootstrap: str, new_topic, postgres_dsn: str
) -> None:
    topic = new_topic(partitions=1)
    keys, sequences = 1_000, 100
    produce_keyed(kafka_bootstrap, topic, keys, sequences)
    total = keys * sequences
    table = f"records_{uuid.uuid4().hex[:8]}"
    app = App(
        client_id="test",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"},
        concurrency=8,
        max_wait_time=0.2,
    )
    app.routes.sink(topic, Postgres(postgres_dsn, table=table, connections=8), lanes=64)
    done = Record()
    app.monitor.subscribe("consumer.consumed", lambda event: done.add(event["count"]))
    with running(app):
        assert done.wait_for(lambda counts: sum(counts) >= total, timeout=180)
    with psycopg.connect(postgres_dsn) as connection:
        rows: list[Any] = connection.execute(
            f'SELECT key, (payload->>\'seq\')::int, "offset" FROM {table} ORDER BY stored_at, "offset"'
        ).fetchall()
        duplicates = connection.execute(
            f'SELECT count(*) FROM (SELECT topic, partition, "offset" FROM {table}'
            " GROUP BY 1, 2, 3 HAVING count(*) > 1) d"
        ).fetchone()
    assert duplicates == (0,)
    assert sorted(offset for _, _, offset in rows) == list(range(total)), "each record once"
    per_key: dict[str, list[int]] = {}
    for key, seq, _ in rows:
        per_key.setdefault(key, []).append(seq)
    assert len(per_key) == keys
    for key, seqs in per_key.items():
        assert seqs == list(range(sequences)), f"{key}: {seqs[:20]}"


def test_a_record_stored_again_is_not_stored_twice(postgres_dsn: str) -> None:
    """Redelivery after a crash: the same (topic, partition, offset) again is a no-op."""
    from conveyor.messages import Deserializers, Message  # noqa: PLC0415
    from unit.processing.fakes import FakeRaw  # noqa: PLC0415

    table = f"records_{uuid.uuid4().hex[:8]}"
    sink = Postgres(postgres_dsn, table=table)
    sink.open()
    try:
        batch = [Message(FakeRaw(offset, key=b"k"), Deserializers()) for offset in range(3)]
        assert sink.deliver(batch) == [None, None, None]
        assert sink.deliver(batch[1:]) == [None, None]
    finally:
        sink.close()
    with psycopg.connect(postgres_dsn) as connection:
        assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (3,)


def test_a_killed_connector_stores_everything_once_and_never_committed_ahead(
    kafka_bootstrap: str, new_topic, postgres_dsn: str
) -> None:
    from integration.processing.test_server import Server  # noqa: PLC0415

    topic = new_topic(partitions=1)
    keys, sequences = 200, 30
    produce_keyed(kafka_bootstrap, topic, keys, sequences)
    total = keys * sequences
    table = f"records_{uuid.uuid4().hex[:8]}"
    group = f"pg-kill-{uuid.uuid4().hex[:8]}"
    # where pg_app lives, before whatever the caller put on the path
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    extra = {"DSN": postgres_dsn, "TABLE": table, "PYTHONPATH": path}

    def stored() -> int:
        with psycopg.connect(postgres_dsn) as connection:
            try:
                return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
            except psycopg.errors.UndefinedTable:
                return 0

    first = Server(topic, group, kafka_bootstrap, slow=0.003, app="pg_app:app", **extra)
    try:
        assert first.wait_for(
            lambda lines: sum(line.startswith("commit") for line in lines) >= 5, 90
        )
    finally:
        first.process.kill()
        first.process.wait(30)
    assert stored() < total, "the kill came mid-stream"
    second = Server(topic, group, kafka_bootstrap, app="pg_app:app", **extra)
    # a commit of the end comes only once every record below it was stored
    assert second.wait_for(
        lambda lines: any(line.startswith(f"commit {total} ") for line in lines), 120
    )
    assert second.stop() == 0
    commits = [
        (int(line.split()[1]), float(line.split()[2]))
        for line in first.lines + second.lines
        if line.startswith("commit ")
    ]
    with psycopg.connect(postgres_dsn) as connection:
        rows = connection.execute(
            f"SELECT key, (payload->>'seq')::int, \"offset\","
            # when the row's transaction committed (track_commit_timestamp), not when it was
            # inserted: a Kafka commit must not come between the two
            " extract(epoch from pg_xact_commit_timestamp(xmin))"
            f' FROM {table} ORDER BY stored_at, "offset"'
        ).fetchall()
    assert sorted(offset for _, _, offset, _ in rows) == list(range(total)), "each record once"
    per_key: dict[str, list[int]] = {}
    for key, seq, _, _ in rows:
        per_key.setdefault(key, []).append(seq)
    for key, seqs in per_key.items():  # rows keep the first delivery: its order per key
        assert seqs == list(range(sequences)), f"{key}: {seqs[:20]}"
    in_postgres = {offset: float(at) for _, _, offset, at in rows}  # its COMMIT's time
    assert len(commits) >= 5
    for committed, at in commits:  # everything below a commit was committed in PostgreSQL
        late = [offset for offset in range(committed) if in_postgres[offset] > at + 0.001]
        assert not late, (
            f"Kafka commit {committed} at {at} came before offsets {late[:10]} were committed "
            "in PostgreSQL"
        )
