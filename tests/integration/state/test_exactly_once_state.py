"""Exactly-once state against the real broker, through repeated SIGKILLs: a process counting per
key in a RocksDB store, producing each message's running count in the same transaction as the
store's changelog and the offset (``counts_app.py``): read committed, each key's counts are 1,
2, ... n with no gap and no repeat, and the changelog holds each key's total. And a route's
tumbling window (``windows_app.py``): each window's final count is emitted exactly once. And
at least once (``alo_counts_app.py``): no update lost through SIGKILLs, and a restart on its
predecessor's folder replays only what the store lacked."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conveyor import Admin, Producer
from conveyor.state import changelog_topic
from helpers import ServerProcess, conveyor_argv, read_to_end
from integration.state.test_stores import changelog_values

HERE = Path(__file__).resolve().parent
KILLS = int(os.environ.get("CONVEYOR_STATE_KILLS", "4"))
"""Kill rounds (``CONVEYOR_STATE_KILLS=20`` for the long form)."""
KEYS = 40


def server(
    topic: str,
    output: str,
    group: str,
    bootstrap: str,
    state_dir: Path,
    app: str = "counts_app:app",
    slow: float = 0.002,
    **settings: str,
) -> ServerProcess:
    """``settings``: more of the environment (``CONVEYOR_TRANSACTION_INTERVAL``, say)."""
    env = dict(
        os.environ,
        **settings,
        TOPIC=topic,
        OUTPUT=output,
        GROUP=group,
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        STATE_DIR=str(state_dir),
        SLOW=str(slow),
    )
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(HERE.parents[1]), env.get("PYTHONPATH", "")]
    )
    return ServerProcess(
        conveyor_argv("server", "--app", app, "--log-level", "WARNING"),
        env=env,
        cwd=HERE,
    )


def committed(admin: Admin, group: str) -> int:
    """The offsets ``group`` committed, summed over its partitions."""
    return sum(lag.committed or 0 for lag in admin.read_lags([group]))


def kill_repeatedly(
    start: Callable[[], ServerProcess], done: Callable[[], bool], rng: random.Random
) -> int:
    """Up to KILLS rounds: start a process, SIGKILL it at a random moment after its first
    batch; stops early once ``done()`` (the input is all committed: nothing is left to kill
    mid-stream). Returns the kills that landed mid-stream."""
    killed = 0
    for _ in range(KILLS):
        if done():
            break
        process = start()
        try:
            deadline = time.monotonic() + 90
            while not process.wait_for(
                lambda lines: any(line.startswith("batch") for line in lines), 2
            ):
                assert not done() or killed, "the input ran out before the first kill"
                assert time.monotonic() < deadline, process.lines[-10:]
                if done():
                    return killed
            threading.Event().wait(rng.uniform(0.1, 0.8))
            killed += 1
        finally:
            process.stop(signal.SIGKILL)
    return killed


def committed_counts(bootstrap: str, topic: str, expected: int) -> dict[str, list[int]]:
    """Each key's counts on ``topic``, read committed, in offset order."""
    counts: dict[str, list[int]] = defaultdict(list)
    for message in read_to_end(bootstrap, topic):
        counts[message.key().decode()].append(int(message.value()))
    assert sum(map(len, counts.values())) >= expected
    return counts


@pytest.mark.parametrize("interval", ["0", "0.3"], ids=["per-block", "joint"])
def test_counts_are_exact_through_repeated_sigkills_under_exactly_once(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path, interval: str
) -> None:
    """``joint``: every block joins the app's transaction, committed every 0.3 s."""
    count, partitions = 750 * KILLS, 2  # enough input for every kill round to land
    inputs, outputs = new_topic(partitions=partitions), new_topic(partitions=partitions)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": inputs, "key": f"k{n % KEYS}", "payload": b"x"} for n in range(count)]
        )
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, inputs, "default")
    rng = random.Random(58)
    # the stores' flush interval shorter than the transaction's: the transaction, not the
    # flush, writes what its blocks wrote
    env = {"CONVEYOR_TRANSACTION_INTERVAL": interval, "CONVEYOR_STATE_FLUSH_INTERVAL": "0.05"}
    try:
        killed = kill_repeatedly(
            lambda: server(inputs, outputs, group, kafka_bootstrap, tmp_path / "state", **env),
            lambda: committed(kafka_admin, group) >= count,
            rng,
        )
        final = server(inputs, outputs, group, kafka_bootstrap, tmp_path / "state", **env)
        try:
            deadline = time.monotonic() + 120
            while committed(kafka_admin, group) < count:
                assert time.monotonic() < deadline, kafka_admin.read_lags([group])
                assert final.process.poll() is None, final.lines[-20:]
                threading.Event().wait(0.2)  # another process commits: the broker is the witness
        finally:
            assert final.stop(signal.SIGTERM) == 0
        assert killed >= max(2, KILLS // 2), f"only {killed} kills landed before the input ran out"
        per_key = count // KEYS
        counts = committed_counts(kafka_bootstrap, outputs, count)
        assert {key: values for key, values in counts.items()} == {
            f"k{n}": list(range(1, per_key + 1)) for n in range(KEYS)
        }, "each count once, in order: no update lost, none applied twice"
        assert changelog_values(kafka_bootstrap, changelog) == {
            f"k{n}": per_key for n in range(KEYS)
        }
    finally:
        if changelog in kafka_admin.list_topics():  # made by the app, if it got that far
            kafka_admin.delete_topic(changelog)


def test_each_final_window_is_emitted_exactly_once_through_repeated_sigkills(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    partitions, keys, per_window, windows = 2, 6, 10, 100
    inputs, outputs = new_topic(partitions=partitions), new_topic(partitions=partitions)
    # timestamps of their own, an hour ago (not older: retention would delete the records), 10
    # messages per key in each 1 s window
    base = (int(time.time()) - 3600) * 1000
    messages = [
        {"topic": inputs, "key": f"k{k}", "payload": b"x", "timestamp": base + w * 1000 + n * 50}
        for w in range(windows)
        for n in range(per_window)
        for k in range(keys)
    ]
    # one message per partition past the last window (plus grace) closes it
    messages += [
        {"topic": inputs, "key": f"k{k}", "payload": b"x", "timestamp": base + (windows + 5) * 1000}
        for k in range(keys)
    ]
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(messages)
    group = f"windows-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, inputs, "window")
    rng = random.Random(59)

    def start() -> ServerProcess:
        return server(
            inputs, outputs, group, kafka_bootstrap, tmp_path / "state", "windows_app:app", slow=0.1
        )

    try:
        killed = kill_repeatedly(start, lambda: committed(kafka_admin, group) >= len(messages), rng)
        final = start()
        try:
            deadline = time.monotonic() + 120
            while committed(kafka_admin, group) < len(messages):
                assert time.monotonic() < deadline, kafka_admin.read_lags([group])
                assert final.process.poll() is None, final.lines[-20:]
                threading.Event().wait(0.2)
        finally:
            assert final.stop(signal.SIGTERM) == 0
        assert killed >= 2, f"only {killed} kills landed before the input ran out"
        emitted = read_windows(kafka_bootstrap, outputs)
        expected = {
            (f"k{k}", base + w * 1000): per_window for w in range(windows) for k in range(keys)
        }
        assert sorted(emitted) == sorted(expected.items()), "each window once, with its full count"
    finally:
        if changelog in kafka_admin.list_topics():  # made by the app, if it got that far
            kafka_admin.delete_topic(changelog)


def read_windows(bootstrap: str, topic: str) -> list[tuple[tuple[str, int], int]]:
    """Each (key, window start) emitted on ``topic`` with its count, read committed."""
    found = []
    for message in read_to_end(bootstrap, topic):
        value = json.loads(message.value())
        found.append(((message.key().decode(), value["start"]), value["count"]))
    return found


def test_at_least_once_no_update_is_lost_through_sigkills_and_a_warm_store_replays_little(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    """Without transactions a killed process's last batches run again (their counts twice),
    but no update is ever lost: each key's count in the changelog is at least its messages.
    And each restart reopens its predecessor's store warm: it replays from the changelog only
    what one flush had sent and not yet written locally (at most one record per key and
    partition), never the changelog's history."""
    count = 3_000
    inputs = new_topic(partitions=2)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": inputs, "key": f"k{n % KEYS}", "payload": b"x"} for n in range(count)]
        )
    group = f"alo-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, inputs, "default")
    processes: list[ServerProcess] = []

    def start() -> ServerProcess:
        process = server(
            inputs, "-", group, kafka_bootstrap, tmp_path / "state", "alo_counts_app:app"
        )
        processes.append(process)
        return process

    try:
        killed = kill_repeatedly(
            start, lambda: committed(kafka_admin, group) >= count, random.Random(60)
        )
        final = start()
        try:
            deadline = time.monotonic() + 120
            while committed(kafka_admin, group) < count:
                assert time.monotonic() < deadline, kafka_admin.read_lags([group])
                assert final.process.poll() is None, final.lines[-20:]
                threading.Event().wait(0.2)  # another process commits: the broker is the witness
        finally:
            assert final.stop(signal.SIGTERM) == 0
        assert killed >= max(2, KILLS // 2), f"only {killed} kills landed before the input ran out"
        per_key = count // KEYS
        values = changelog_values(kafka_bootstrap, changelog)
        lost = {key: value for key, value in values.items() if value < per_key}
        assert len(values) == KEYS
        assert not lost, f"updates lost: {lost}"
        history = sum(
            high for high in (
                kafka_admin.read_watermark_offsets(changelog, p)[1] for p in range(2)
            )
        )  # fmt: skip
        for process in processes[1:]:  # each restart, on its predecessor's folder
            replayed = [
                int(line.split()[2]) for line in process.lines if line.startswith("restored ")
            ]
            assert replayed, process.lines[-10:]
            assert sum(replayed) <= 2 * KEYS < history, (replayed, history)
    finally:
        if changelog in kafka_admin.list_topics():
            kafka_admin.delete_topic(changelog)


def test_each_pair_of_a_join_is_emitted_exactly_once_through_repeated_sigkills(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    """Orders joined with payments in transactions (``joins_app.py``) while half the payments
    come during the kills, after their orders: read committed, each key's pair once."""
    keys, partitions = 200, 2
    orders, payments = new_topic(partitions=partitions), new_topic(partitions=partitions)
    outputs = new_topic(partitions=partitions)
    base = (int(time.time()) - 600) * 1000  # the messages' own time: 5 s per key
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": payments, "key": f"k{k}", "payload": {}, "timestamp": base + k * 5_000}
             for k in range(0, keys, 2)]  # the even keys' payments before their orders
            + [{"topic": orders, "key": f"k{k}", "payload": {}, "timestamp": base + k * 5_000 + 1}
               for k in range(keys)]
        )  # fmt: skip
    group = f"joins-{uuid.uuid4().hex[:8]}"
    rng = random.Random(58)
    late_payments = [
        {"topic": payments, "key": f"k{k}", "payload": {}, "timestamp": base + k * 5_000 + 2}
        for k in range(1, keys, 2)
    ]
    stop = threading.Event()

    def pay_during_the_kills() -> None:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            for message in late_payments:
                producer.produce_sync(**message)
                stop.wait(0.02)

    def start() -> ServerProcess:
        return server(
            orders, outputs, group, kafka_bootstrap, tmp_path / "state", "joins_app:app",
            slow=0.05, RIGHT=payments,
        )  # fmt: skip

    payer = threading.Thread(target=pay_during_the_kills, daemon=True)
    payer.start()
    try:
        killed = kill_repeatedly(start, lambda: committed(kafka_admin, group) >= keys, rng)
        payer.join(60)
        assert not payer.is_alive(), "the payments were not all produced"
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:  # an order per
            producer.produce_many_sync(  # partition after every payment: the last pairs' batch
                [{"topic": orders, "key": f"end{n}", "payload": {},
                  "timestamp": base + keys * 5_000 + n} for n in range(8)]
            )  # fmt: skip
        final = start()
        try:
            deadline = time.monotonic() + 120
            while committed(kafka_admin, group) < keys + 8:
                assert time.monotonic() < deadline, kafka_admin.read_lags([group])
                assert final.process.poll() is None, final.lines[-20:]
                threading.Event().wait(0.2)
        finally:
            assert final.stop(signal.SIGTERM) == 0
        assert killed >= 2, f"only {killed} kills landed before the input ran out"
        paired = sorted(message.key().decode() for message in read_to_end(kafka_bootstrap, outputs))
        assert paired == sorted(f"k{k}" for k in range(keys)), "each key's pair once"
    finally:
        stop.set()
        for name in kafka_admin.list_topics():
            if name.startswith(group):  # the join's changelog, if the app got that far
                kafka_admin.delete_topic(name)
