"""The PostgreSQL sink against a real PostgreSQL (a throwaway cluster) and the real broker."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from conveyor import App, Producer
from conveyor.connect.sinks import Postgres
from helpers import Record, running


def test_64_lanes_store_every_record_once_in_order_per_key(
    kafka_bootstrap: str, new_topic, postgres_dsn: str
) -> None:
    topic = new_topic(partitions=1)
    keys, sequences = 1_000, 100
    with Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "key": f"k{key}", "payload": {"seq": seq}}
                for seq in range(sequences)
                for key in range(keys)
            ]
        )
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
