"""Exactly-once state against the real broker: a process counting per key in a RocksDB store,
and producing each message's running count in the same transaction as the store's changelog
and the offset, is SIGKILLed again and again (``counts_app.py``). Every restart reopens the
slot's store warm or behind its changelog. At the end, read committed: each key's counts are
1, 2, ... n with no gap and no repeat, and the changelog holds each key's total."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import confluent_kafka

from conveyor import Admin, Producer
from conveyor.state import changelog_topic
from helpers import ServerProcess, conveyor_argv
from integration.state.test_stores import changelog_values

HERE = Path(__file__).resolve().parent
KILLS = int(os.environ.get("CONVEYOR_STATE_KILLS", "4"))
"""Kill rounds (``CONVEYOR_STATE_KILLS=20`` for the long form)."""
KEYS = 40


def server(topic: str, output: str, group: str, bootstrap: str, state_dir: Path) -> ServerProcess:
    env = dict(
        os.environ,
        TOPIC=topic,
        OUTPUT=output,
        GROUP=group,
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        STATE_DIR=str(state_dir),
        SLOW="0.002",
    )
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(HERE.parents[1]), env.get("PYTHONPATH", "")]
    )
    return ServerProcess(
        conveyor_argv("server", "--app", "counts_app:app", "--log-level", "WARNING"),
        env=env,
        cwd=HERE,
    )


def committed_counts(bootstrap: str, topic: str, expected: int) -> dict[str, list[int]]:
    """Each key's counts on ``topic``, read committed, in offset order."""
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    counts: dict[str, list[int]] = defaultdict(list)
    try:
        partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
        reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        ended: set[int] = set()
        deadline = time.monotonic() + 60
        while len(ended) < len(partitions):
            assert time.monotonic() < deadline, (len(ended), sum(map(len, counts.values())))
            for message in reader.consume(500, 0.5):
                if message.error() is not None:
                    ended.add(message.partition())
                    continue
                counts[message.key().decode()].append(int(message.value()))
    finally:
        reader.close()
    assert sum(map(len, counts.values())) >= expected
    return counts


def test_counts_are_exact_through_repeated_sigkills_under_exactly_once(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    count, partitions = 3_000, 2
    inputs, outputs = new_topic(partitions=partitions), new_topic(partitions=partitions)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": inputs, "key": f"k{n % KEYS}", "payload": b"x"} for n in range(count)]
        )
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, inputs, "default")
    rng = random.Random(58)
    try:
        for _ in range(KILLS):
            process = server(inputs, outputs, group, kafka_bootstrap, tmp_path / "state")
            try:
                assert process.wait_for(
                    lambda lines: any(line.startswith("batch") for line in lines), 90
                ), process.lines[-10:]
                threading.Event().wait(rng.uniform(0.1, 0.8))
            finally:
                process.stop(signal.SIGKILL)
        final = server(inputs, outputs, group, kafka_bootstrap, tmp_path / "state")
        try:
            deadline = time.monotonic() + 120
            while sum(lag.committed or 0 for lag in kafka_admin.read_lags([group])) < count:
                assert time.monotonic() < deadline, kafka_admin.read_lags([group])
                assert final.process.poll() is None, final.lines[-20:]
                threading.Event().wait(0.2)  # another process commits: the broker is the witness
        finally:
            assert final.stop(signal.SIGTERM) == 0
        per_key = count // KEYS
        counts = committed_counts(kafka_bootstrap, outputs, count)
        assert {key: values for key, values in counts.items()} == {
            f"k{n}": list(range(1, per_key + 1)) for n in range(KEYS)
        }, "each count once, in order: no update lost, none applied twice"
        assert changelog_values(kafka_bootstrap, changelog) == {
            f"k{n}": per_key for n in range(KEYS)
        }
    finally:
        kafka_admin.delete_topic(changelog)
