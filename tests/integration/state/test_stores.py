"""State stores against the real broker: counts per key exact across a restart that reopens
the store warm (nothing replayed), a restore from the changelog alone (the local files gone),
a memory store restored in full at each start, and a failed batch that writes nothing."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from conveyor import Admin, App, Consumer, Producer
from conveyor.errors import KafkaError
from conveyor.state import Store, changelog_topic, partition_stores
from helpers import read_to_end, running, wait_committed

KEYS = [f"user-{n}" for n in range(12)]


class Counts(Consumer):
    """Counts messages per key in its partition's store; tells the test where it got to."""

    progress: dict[int, int]
    reached: threading.Condition
    fail_once: set[int]

    def consume(self) -> None:
        counts = self.state
        for message in self.messages:
            counts[message.key] = counts.get(message.key, 0) + 1
            if message.offset in self.fail_once:  # after the write: the retry must not count it
                self.fail_once.discard(message.offset)
                raise RuntimeError(f"failing once at offset {message.offset}")
        with self.reached:
            self.progress[self.partition] = self.messages.last.offset + 1
            self.reached.notify_all()


def counting_app(
    bootstrap: str,
    group: str,
    topic: str,
    state_dir: Path,
    store: Store,
    fail_once: set[int],
    assign: list[int] | None = None,
    counter: type[Counts] = Counts,
    **settings: Any,
) -> tuple[App, list[Any], dict[int, int], threading.Condition]:
    progress: dict[int, int] = {}
    reached = threading.Condition()
    consumer = type(
        "CountsHere", (counter,), {"progress": progress, "reached": reached, "fail_once": fail_once}
    )
    app = App(
        client_id="counts",
        kafka={"bootstrap.servers": bootstrap, "group.id": group},
        state_dir=state_dir,
        max_wait_time=0.05,
        pause_timeout=0.1,
        concurrency=2,
        **settings,
    )
    app.routes.topic(topic, consumer, state=store, **({"assign": assign} if assign else {}))
    restored: list[Any] = []
    app.monitor.subscribe("state.restored", restored.append)
    return app, restored, progress, reached


def produce(bootstrap: str, topic: str, rounds: int) -> Counter[str]:
    sent: Counter[str] = Counter()
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "key": key, "payload": n} for n in range(rounds) for key in KEYS]
        )
    for key in KEYS:
        sent[key] += rounds
    return sent


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        partitions = [p.partition for p in admin.topic_info(topic).partitions]
        return {p: admin.read_watermark_offsets(topic, p)[1] for p in partitions}


def count_until_processed(
    bootstrap: str,
    group: str,
    topic: str,
    state_dir: Path,
    store: Store,
    fail_once: set[int],
    **settings: Any,
) -> list[Any]:
    """Run a counting app until it processed all ``topic`` holds; its ``state.restored``
    events."""
    app, restored, progress, reached = counting_app(
        bootstrap, group, topic, state_dir, store, fail_once, **settings
    )
    with running(app):
        wait_processed(progress, reached, ends(bootstrap, topic))
    return restored


def wait_processed(
    progress: dict[int, int], reached: threading.Condition, until: dict[int, int]
) -> None:
    with reached:
        done = reached.wait_for(
            lambda: all(progress.get(p, 0) >= end for p, end in until.items() if end), 60
        )
    assert done, (progress, until)


def changelog_values(bootstrap: str, topic: str) -> dict[str, int]:
    """Each key's last value in ``topic``, read to its end (committed records only)."""
    return {m.key().decode(): int(m.value()) for m in read_to_end(bootstrap, topic)}


def test_counts_stay_exact_across_a_warm_restart_and_a_restore_from_the_changelog_alone(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    expected = Counter[str]()
    try:
        # 1. a first run counts what is there
        expected += produce(kafka_bootstrap, topic, 5)
        restored = count_until_processed(
            kafka_bootstrap, group, topic, tmp_path / "state", Store(backend="rocksdb"), set()
        )
        assert changelog_values(kafka_bootstrap, changelog) == expected
        assert {e["partition"] for e in restored} == {0, 1}
        assert all(e["records"] == 0 for e in restored), "an empty changelog replays nothing"

        # 2. restarted on the same folder: the store is warm, nothing is replayed
        expected += produce(kafka_bootstrap, topic, 3)
        restored = count_until_processed(
            kafka_bootstrap, group, topic, tmp_path / "state", Store(backend="rocksdb"), set()
        )
        assert {e["partition"] for e in restored} == {0, 1}
        assert [e["records"] for e in restored] == [0, 0], restored
        assert changelog_values(kafka_bootstrap, changelog) == expected

        # 3. the local files gone (a new machine): restored from the changelog, counts go on
        expected += produce(kafka_bootstrap, topic, 2)
        restored = count_until_processed(
            kafka_bootstrap, group, topic, tmp_path / "elsewhere", Store(backend="rocksdb"), set()
        )
        replayed = sum(e["records"] for e in restored)
        assert replayed >= len(KEYS), restored  # every key's value came back from the changelog
        assert changelog_values(kafka_bootstrap, changelog) == expected
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def test_a_memory_store_is_restored_in_full_and_a_failed_batch_writes_nothing(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    expected = Counter[str]()
    try:
        expected += produce(kafka_bootstrap, topic, 4)
        # offset 5's batch fails once after counting: its retry must count each message once;
        # each batch flushed at its end (state_flush_interval=0), as before the interval
        restored = count_until_processed(
            kafka_bootstrap, group, topic, tmp_path, Store(backend="memory"), {5, 30},
            state_flush_interval=0,
        )  # fmt: skip
        assert changelog_values(kafka_bootstrap, changelog) == expected

        expected += produce(kafka_bootstrap, topic, 1)
        restored = count_until_processed(
            kafka_bootstrap, group, topic, tmp_path, Store(backend="memory"), set()
        )
        [event] = restored
        assert event["records"] > 0, "a memory store starts empty: all of it is replayed"
        assert changelog_values(kafka_bootstrap, changelog) == expected
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def test_a_hot_key_written_by_many_batches_costs_one_changelog_record_per_flush(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [{"topic": topic, "key": "hot", "payload": n} for n in range(400)]
            )
        # offset 205's batch fails once after counting: the 20 batches before it keep their
        # writes (not flushed yet), and its retry counts each of its messages once
        count_until_processed(
            kafka_bootstrap, group, topic, tmp_path, Store(), {205},
            max_messages=10, state_flush_interval=60,
        )  # fmt: skip
        assert changelog_values(kafka_bootstrap, changelog) == {"hot": 400}
        records = ends(kafka_bootstrap, changelog)[0]
        # 40 batches: a flush as the failure came (the 20 batches before it) and one as the
        # app stopped, not one per batch nor one each time the partition's backlog ran dry
        assert records <= 2, f"{records} changelog records for the 40 batches"
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


class CountsInTransactions(Counts):
    """Counts as :class:`Counts` does, each batch in a transaction with its offset."""

    def consume(self) -> None:
        with self.transaction():
            counts = self.state
            for message in self.messages:
                counts[message.key] = counts.get(message.key, 0) + 1
            self.mark_as_consumed(self.messages.last)
        with self.reached:
            self.progress[self.partition] = self.messages.last.offset + 1
            self.reached.notify_all()


def test_a_transaction_commits_its_store_writes_to_the_changelog_with_its_offset(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    """Under exactly-once a batch's store writes are in its transaction: committed with it,
    not kept for the next flush (here an interval longer than the test)."""
    topic = new_topic(partitions=1)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    try:
        app, _, progress, reached = counting_app(
            kafka_bootstrap, group, topic, tmp_path, Store(), set(), [0],
            counter=CountsInTransactions, state_flush_interval=600,
        )  # fmt: skip
        with running(app):
            trickle(kafka_bootstrap, topic, 3, progress, reached)
            assert changelog_values(kafka_bootstrap, changelog) == {"hot": 3}, (
                "each transaction's count is in the changelog once it committed"
            )
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def trickle(
    bootstrap: str, topic: str, count: int, progress: dict[int, int], reached: threading.Condition
) -> None:
    """``count`` messages of one key, each sent once the one before was processed: every
    batch holds one message, and the partition's backlog runs dry after each."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for _ in range(count):
            report = producer.produce_sync(topic=topic, key="hot", payload=1)
            wait_processed(progress, reached, {0: report.offset + 1})


def test_a_partition_whose_backlog_runs_dry_flushes_once_per_interval_and_as_the_app_stops(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    try:
        # an interval longer than the test: the job ending at each message flushes nothing;
        # assigned directly, so that no revocation as the app stops flushes it instead
        app, _, progress, reached = counting_app(
            kafka_bootstrap, group, topic, tmp_path, Store(), set(), [0], state_flush_interval=600
        )
        with running(app):
            trickle(kafka_bootstrap, topic, 10, progress, reached)
            assert ends(kafka_bootstrap, changelog) == {0: 0}, "kept for the next flush"
        # the app stopped: what its idle partition kept is flushed before its last commit
        assert changelog_values(kafka_bootstrap, changelog) == {"hot": 10}
        assert ends(kafka_bootstrap, changelog) == {0: 1}, "one record for the 10 batches"
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            [lag] = admin.read_lags([group])
        assert lag.committed == 10, "their offset committed with them"

        # a short interval: a timer flushes what the idle partition kept, the app running on
        app, _, progress, reached = counting_app(
            kafka_bootstrap, group, topic, tmp_path, Store(), set(), state_flush_interval=0.2
        )
        with running(app):
            trickle(kafka_bootstrap, topic, 5, progress, reached)
            deadline = time.monotonic() + 30
            while changelog_values(kafka_bootstrap, changelog) != {"hot": 15}:
                assert time.monotonic() < deadline, "no flush while the app ran"
                time.sleep(0.2)
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def test_a_restore_cut_short_keeps_its_progress_and_the_next_one_goes_on_from_there(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(partition_stores, "_RESTORE_BATCH_BYTES", 2_000)  # progress kept often
    topic = new_topic(partitions=1)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        admin.create_topic(changelog, 1, config={"cleanup.policy": "compact"})
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:  # as a store wrote it
            producer.produce_many_sync(
                [{"topic": changelog, "key": f"k{n}", "payload": b"%d" % n} for n in range(5_000)]
            )
        first, _restored, _progress, _reached = counting_app(
            kafka_bootstrap, group, topic, tmp_path, Store(backend="rocksdb"), set()
        )
        cut: list[Any] = []
        progressed, release = threading.Event(), threading.Event()

        def hold_the_restore(event: Any) -> None:  # on the restore thread, after a batch
            if not cut:
                cut.append(event)
                progressed.set()
                release.wait(30)  # until the app stopped: the restore cannot end first

        first.monitor.subscribe("state.restoring", hold_the_restore)
        first.start()
        try:
            assert progressed.wait(60), "the restore reported no progress"
        finally:
            first.stop_and_wait()  # the partition stops (waits for the held restore a while)
            release.set()
        assert cut, "the restore reported no progress before it ended"
        kept = cut[0]["offset"]
        assert 0 < kept < 5_000

        expected = produce_one(kafka_bootstrap, topic, "k42")
        restored = count_until_processed(
            kafka_bootstrap, group, topic, tmp_path, Store(backend="rocksdb"), set()
        )
        [event] = restored
        assert event["start"] >= kept, "the second restore went on from the first one's progress"
        assert event["records"] <= 5_000 - kept
        assert changelog_values(kafka_bootstrap, changelog)["k42"] == expected
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def produce_one(bootstrap: str, topic: str, key: str) -> int:
    """One message of ``key``: its count after it, 43 for k42 (42 restored, then one more)."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_sync(topic=topic, key=key, payload=1)
    return int(key[1:]) + 1


def test_a_changelog_recreated_under_a_warm_store_stops_its_partition_or_rebuilds_it(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    group = f"counts-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    try:
        produce(kafka_bootstrap, topic, 2)
        store = Store(backend="rocksdb")
        count_until_processed(kafka_bootstrap, group, topic, tmp_path, store, set())
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:  # recreated, empty
            admin.delete_topic(changelog)
            deadline = time.monotonic() + 30
            while True:
                try:
                    admin.create_topic(changelog, 1, config={"cleanup.policy": "compact"})
                    break
                except KafkaError:  # still being deleted
                    assert time.monotonic() < deadline
                    threading.Event().wait(0.2)
        produce(kafka_bootstrap, topic, 1)
        refused = threading.Event()
        reasons: list[str] = []

        class Seen(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "ChangelogMismatchError" in record.getMessage():
                    reasons.append(record.getMessage())
                    refused.set()

        seen = Seen()
        logging.getLogger("conveyor.processing").addHandler(seen)
        try:
            app, _restored, progress, _reached = counting_app(
                kafka_bootstrap, group, topic, tmp_path, store, set()
            )
            with running(app):
                assert refused.wait(30), "the mismatch was not reported"
                assert progress == {}, "the partition ran with a store its changelog lacks"
        finally:
            logging.getLogger("conveyor.processing").removeHandler(seen)
        assert "deleted or recreated" in reasons[0]
        assert str(tmp_path) in reasons[0], "it names the folder to delete"

        # declared to rebuild: the files go, the store comes back from the recreated (empty)
        # changelog, and the round the refused run left is counted on it
        count_until_processed(
            kafka_bootstrap, group, topic, tmp_path, Store(backend="rocksdb", rebuild=True), set()
        )
        assert changelog_values(kafka_bootstrap, changelog) == dict.fromkeys(KEYS, 1)
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def test_virtual_partitions_count_each_key_exactly_through_a_failed_lane_and_a_restart(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    """Four lanes write one partition's store, each key from one lane (the lane's key is the
    message's): a lane's writes reach the changelog and the store before its offsets count
    as done, a failed lane batch writes nothing, and a restart goes on from the store."""
    topic = new_topic(partitions=1)
    group = f"lanes-{uuid.uuid4().hex[:8]}"
    fail_once = {37, 101}

    class LaneCounts(Consumer):
        def consume(self) -> None:
            counts = self.state
            for message in self.messages:
                counts[message.key] = counts.get(message.key, 0) + 1
                if message.offset in fail_once:  # after the write: the retry must not count it
                    fail_once.discard(message.offset)
                    raise RuntimeError(f"failing once at offset {message.offset}")

    def run_until_committed() -> None:
        app = App(
            client_id="lanes",
            kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
                   "auto.offset.reset": "earliest"},
            state_dir=tmp_path / "state", max_wait_time=0.05, concurrency=4, max_messages=10,
        )  # fmt: skip
        app.routes.topic(topic, LaneCounts, state=Store(), virtual_partitions={"max_partitions": 4})
        end = ends(kafka_bootstrap, topic)[0]
        with running(app):
            wait_committed(kafka_admin, group, end)  # commits are the lanes': nothing to wait on

    changelog = changelog_topic(group, topic, "default")
    try:
        expected = produce(kafka_bootstrap, topic, 20)
        run_until_committed()
        assert not fail_once, "both failures happened"
        assert changelog_values(kafka_bootstrap, changelog) == expected
        expected += produce(kafka_bootstrap, topic, 5)
        run_until_committed()
        assert changelog_values(kafka_bootstrap, changelog) == expected, "on from the store"
    finally:
        if changelog in kafka_admin.list_topics():
            kafka_admin.delete_topic(changelog)


def test_a_partition_s_store_is_rebuilt_from_its_changelog_while_the_app_runs(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    """``app.stores.rebuild``: the local copy is deleted (a key only it held is gone) and
    restored from the changelog (every key back), the partition staying with the process,
    and the counts go on from there."""
    topic = new_topic(partitions=1)
    group = f"rebuild-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    state_dir = tmp_path / "state"
    expected = produce(kafka_bootstrap, topic, 5)
    try:
        count_until_processed(
            kafka_bootstrap, group, topic, state_dir, Store(backend="rocksdb"), set()
        )
        [folder] = state_dir.glob(f"{group}/*/{topic}/default/0")
        local = partition_stores.RocksDBBackend(folder)  # a key the changelog never had
        local.write({b"ghost": b"1"}, {})
        local.close()
        app, restored, progress, reached = counting_app(
            kafka_bootstrap, group, topic, state_dir, Store(backend="rocksdb"), set()
        )
        with running(app):
            wait_processed(progress, reached, {0: 0})
            deadline = time.monotonic() + 30
            while not restored:
                assert time.monotonic() < deadline, "the partition's stores never opened"
                threading.Event().wait(0.05)
            assert app.stores.get("default", "ghost") == 1, "the local copy holds the ghost"
            assert app.stores.rebuild(topic, 0) == {"topic": topic, "partition": 0,
                                                     "stores": ["default"]}  # fmt: skip
            while len(restored) < 2:
                assert time.monotonic() < deadline, "no restore after the rebuild"
                threading.Event().wait(0.05)
            assert restored[-1]["start"] == 0, restored[-1]
            assert restored[-1]["records"] == len(KEYS), "every key from the changelog"
            assert app.stores.get("default", "ghost") is None, "the local copy was deleted"
            expected += produce(kafka_bootstrap, topic, 2)
            wait_processed(progress, reached, ends(kafka_bootstrap, topic))
        assert changelog_values(kafka_bootstrap, changelog) == expected, "counts went on"
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)


def test_an_aborted_joint_transaction_leaves_the_store_as_its_last_commit_left_it(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    """Blocks of batches of 2 join one transaction (``transaction_interval``) while the stores'
    flush interval is far shorter: their writes wait for the transaction, not the flush, so
    when a later block fails and the transaction aborts, its earlier batches run again
    against the store as the last commit left it and count each message once."""
    topic, outputs = new_topic(partitions=1), new_topic(partitions=1)
    group = f"joint-{uuid.uuid4().hex[:8]}"
    failed = threading.Event()

    class CountsWithOutputs(Consumer):
        def consume(self) -> None:
            with self.transaction():
                counts = self.state
                for message in self.messages:
                    counts[message.key] = counts.get(message.key, 0) + 1
                    self.produce_async(topic=outputs, key=message.key, payload=counts[message.key])
                    if message.offset == 9 and not failed.is_set():
                        failed.set()  # after the batches before it joined the transaction
                        raise RuntimeError("failing once inside the transaction")
                self.mark_as_consumed(self.messages.last)

    app = App(
        client_id="joint",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
               "auto.offset.reset": "earliest"},
        state_dir=tmp_path / "state", max_wait_time=0.05, pause_timeout=0.1, max_messages=2,
        transaction_interval=2.0, state_flush_interval=0.01,
    )  # fmt: skip
    app.routes.topic(topic, CountsWithOutputs, state=Store(backend="rocksdb"))
    changelog = changelog_topic(group, topic, "default")
    try:
        expected = produce(kafka_bootstrap, topic, 2)  # offsets 0-23: every key twice
        with running(app):
            wait_committed(kafka_admin, group, 24)
        assert failed.is_set()
        counts: dict[str, list[int]] = {}
        for message in read_to_end(kafka_bootstrap, outputs):
            counts.setdefault(message.key().decode(), []).append(int(message.value()))
        assert counts == {key: [1, 2] for key in KEYS}, "each message counted once"
        assert changelog_values(kafka_bootstrap, changelog) == expected
    finally:
        if changelog in kafka_admin.list_topics():
            kafka_admin.delete_topic(changelog)


def test_writes_after_a_block_reach_the_changelog_beside_other_partitions_joint_commits(
    kafka_bootstrap: str, new_topic: Any, kafka_admin: Admin, tmp_path: Path
) -> None:
    """Under ``transaction_interval`` a commit runs on whichever thread ends the last block,
    while other partitions' batches may write their stores after their blocks: the commit
    writes what the blocks kept, a batch's later writes are kept as it ends (for the open
    transaction, or for the partition's own flush, which its next block hands to the
    transaction), and no key is written by two of them at once. Counts came out short: a
    commit cleared writes made while it ran, and a flush and a commit wrote one key each."""
    topic = new_topic(partitions=4)
    group = f"after-block-{uuid.uuid4().hex[:8]}"

    class CountsAfterTheBlock(Consumer):
        def consume(self) -> None:
            with self.transaction():
                self.mark_as_consumed(self.messages.last)
            counts = self.state
            for message in self.messages:  # (slowly: other partitions' commits run meanwhile)
                counts[message.key] = counts.get(message.key, 0) + 1
                threading.Event().wait(0.002)

    app = App(
        client_id="after-block",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
               "auto.offset.reset": "earliest"},
        state_dir=tmp_path / "state", max_wait_time=0.05, pause_timeout=0.1, max_messages=4,
        concurrency=4, transaction_interval=0.01, state_flush_interval=0.05,
    )  # fmt: skip
    app.routes.topic(topic, CountsAfterTheBlock, state=Store(backend="memory"))
    changelog = changelog_topic(group, topic, "default")
    try:
        expected = produce(kafka_bootstrap, topic, 12)
        with running(app):
            wait_committed(kafka_admin, group, 144)
        assert changelog_values(kafka_bootstrap, changelog) == expected
    finally:
        if changelog in kafka_admin.list_topics():
            kafka_admin.delete_topic(changelog)
