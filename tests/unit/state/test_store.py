"""State stores without a broker: the declaration's checks, the mapping a consumer sees (its
batch's writes first, one entry per key, dropped on failure), both backends, the codec check,
the changelog's name and ``conveyor.testing``'s stores."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer, testing
from conveyor.state import State, Store, StoreCodecMismatchError, changelog_topic
from conveyor.state.backends import MemoryBackend, RocksDBBackend
from conveyor.state.partition_stores import OpenStores, PartitionStores


def app() -> App:
    return App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})


class Counts(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            self.state[message.key] = self.state.get(message.key, 0) + 1
            if message.payload == {"v": "boom"}:
                raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("options", "setting", "text"),
    [
        ({"backend": "redis"}, "backend", "'rocksdb' or 'memory'"),
        ({"keys": "int"}, "keys", "'str', 'bytes' or 'json'"),
        ({"values": "yaml"}, "values", "bytes, json, pickle"),
        ({"values": object()}, "values", "name, encode and decode"),
        ({"changelog": "yes"}, "changelog", "True or False"),
        ({"rebuild": 1}, "rebuild", "True or False"),
    ],
)
def test_a_malformed_store_is_refused_naming_its_setting(
    options: dict[str, Any], setting: str, text: str
) -> None:
    with pytest.raises(ConfigurationError, match=text) as refused:
        Store(**options)
    assert refused.value.setting == setting


@pytest.mark.parametrize(
    ("state", "text"),
    [
        ("counts", r"a Store\(\) or a dict of them"),
        ({}, r"a Store\(\) or a dict of them"),
        ({"bad name": Store()}, "letters, digits"),
        ({"counts": "x"}, r"state\['counts'\] must be a Store"),
    ],
)
def test_a_route_s_state_option_is_checked_when_declared(state: Any, text: str) -> None:
    with pytest.raises(ConfigurationError, match=text) as refused:
        app().routes.topic("clicks", Counts, state=state)
    assert refused.value.setting == "state"


def test_stores_go_with_virtual_partitions_but_windows_joins_and_async_lanes_do_not() -> None:
    from conveyor.state import Join, Tumbling  # noqa: PLC0415 - this test's only

    class Windows(Consumer):
        window = Tumbling(60).count()

    class Joins(Consumer):
        join = Join("payments", within=60)

    class Async(Consumer):
        async def consume(self) -> None:
            pass

    routes = app().routes
    assert routes.topic("clicks", Counts, state=Store(), virtual_partitions=True).state
    for consumer, text in ((Windows, "the window"), (Joins, "the join"), (Async, "async def")):
        with pytest.raises(ConfigurationError, match=text) as refused:
            routes.topic("other", consumer, state=Store(), virtual_partitions=True)
        assert refused.value.setting == "virtual_partitions"


def test_one_store_is_named_default_and_several_keep_their_names() -> None:
    routes = app().routes
    one = routes.topic("a", Counts, state=Store())
    two = routes.topic("b", Counts, state={"counts": Store(), "seen": Store(values="pickle")})
    assert list(one.state) == ["default"]
    assert list(two.state) == ["counts", "seen"]


def test_a_state_dir_that_is_not_a_folder_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="state_dir must be a folder") as refused:
        App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"}, state_dir=3)  # type: ignore[arg-type]
    assert refused.value.setting == "state_dir"


def test_reads_see_the_batch_s_writes_and_a_key_is_written_once_per_batch() -> None:
    backend = MemoryBackend()
    backend.write({b"a": b"1", b"gone": b"5"}, {})
    state = State("counts", Store(backend="memory"), backend)
    for _ in range(500):  # a hot key
        state["a"] = state.get("a", 0) + 1
    state["b"] = [1, 2]
    del state["gone"]
    assert state["a"] == 501
    assert state["b"] == [1, 2]
    assert "gone" not in state
    assert state.get("gone") is None
    assert sorted(state) == ["a", "b"]
    assert len(state) == 2
    assert backend.get(b"a") == b"1", "nothing reaches the backend before the batch's end"
    assert state.changes() == {b"a": b"501", b"b": b"[1,2]", b"gone": None}
    with pytest.raises(KeyError):
        del state["never"]
    with pytest.raises(TypeError, match="keys are str"):
        state[b"raw"] = 1


def test_a_failed_batch_s_writes_are_dropped() -> None:
    backend = MemoryBackend()
    state = State("counts", Store(backend="memory"), backend)
    state["a"] = 1
    state.discard()
    assert "a" not in state
    assert not state.dirty


def test_a_failed_batch_drops_its_own_writes_and_keeps_the_earlier_batches_for_the_flush() -> None:
    backend = MemoryBackend()
    backend.write({b"a": b"1", b"gone": b"1"}, {})
    state = State("counts", Store(backend="memory"), backend)
    for _ in range(3):  # three batches that ended well, not flushed yet
        state["a"] = state["a"] + 1
        state.keep()
    del state["gone"]
    state.keep()
    assert state.dirty
    assert state.kept == 2
    state["a"] = 100  # a batch that fails
    state["b"] = 1
    state.discard()
    assert state["a"] == 4, "the earlier batches' writes are still read"
    assert "b" not in state
    assert "gone" not in state
    assert sorted(state) == ["a"]
    assert backend.get(b"a") == b"1", "nothing reaches the backend before the flush"
    state["a"] = 5  # the retry
    assert state.changes() == {b"a": b"5", b"gone": None}, "one record per key since the flush"
    state.applied()
    assert not state.dirty
    assert state["a"] == 1, "reads go to the backend now (a flush writes it)"
    state["c"] = 1
    state.keep()
    state.discard_all()  # the partition went away: its unflushed batches run again elsewhere
    assert not state.dirty
    assert "c" not in state


def test_keys_created_and_deleted_between_two_flushes_leave_nothing_to_write() -> None:
    """``create()`` writes keys the store does not hold (a window's accumulators): deleted
    again before the flush, they leave no tombstone; one flushed in between leaves one."""
    backend = MemoryBackend()
    state = State("windows", Store(backend="memory", keys="json"), backend)
    state.create({"flushed": 1})
    state.commit_to_backend()
    state.create({"new": 1})
    state.keep()
    state.remove("new")
    state.remove("flushed")
    state["kept"] = 2
    assert state.changes() == {b'"flushed"': None, b'"kept"': b"2"}
    with pytest.raises(TypeError):
        state.create({b"raw": 1})
    state.discard_all()  # a flush failed: its records may be in the changelog, not here
    state.create({"new": 1})
    state.keep()
    state.remove("new")
    assert state.changes() == {b'"new"': None}, "until a flush goes well, deletes are written"


def test_a_commit_of_the_kept_writes_leaves_the_running_batch_s_alone() -> None:
    """A joint transaction commits on another thread than the partition's batch, which may
    write on outside its block meanwhile: the commit writes what blocks kept, and the writes
    made in between stay for the next one (they were lost: the commit cleared them)."""
    backend = MemoryBackend()
    state = State("counts", Store(backend="memory"), backend)
    state["a"] = 1
    state.create({"made": 1})
    state.keep()  # the block ended
    changes = state.changes(kept_only=True)  # the commit, on another thread
    state["b"] = 2  # the batch, after its block
    state["a"] = 3
    backend.write(changes, {})
    state.applied(kept_only=True)
    assert changes == {b"a": b"1", b"made": b"1"}
    assert (state["a"], state["b"]) == (3, 2)
    state.remove("made")
    assert state.changes() == {b"a": b"3", b"b": b"2", b"made": None}, "made is stored now"


@pytest.mark.parametrize("value", [-1, "1", True, float("inf")])
def test_a_malformed_state_flush_interval_is_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="state_flush_interval") as refused:
        App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"}, state_flush_interval=value)
    assert refused.value.setting == "state_flush_interval"
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"}, state_flush_interval=0)
    assert app.settings.state_flush_interval == 0


@pytest.mark.parametrize("keys", ["bytes", "json"])
def test_other_key_kinds_round_trip(keys: str) -> None:
    backend = MemoryBackend()
    state = State("s", Store(backend="memory", keys=keys), backend)  # type: ignore[arg-type]
    key: Any = b"\x00k" if keys == "bytes" else ("user", 7)
    state[key] = {"n": 1}
    backend.write(state.changes(), {})
    state.applied()
    assert list(state) == [key]


def test_a_rocksdb_store_keeps_its_data_and_refuses_another_codec(tmp_path: Path) -> None:
    def stores(values: str) -> PartitionStores:
        return PartitionStores(
            {"s": Store(backend="rocksdb", values=values, changelog=False)},
            group="g",
            topic="t",
            partition=0,
            folder=tmp_path,
            registry=OpenStores(),
            reader=lambda: None,
        )

    first = stores("json")
    first.open()
    first.views["s"]["k"] = {"v": 1}
    first.flush(producer=None)
    first.close()
    again = stores("json")
    again.open()
    assert again.views["s"]["k"] == {"v": 1}
    again.close()
    with pytest.raises(StoreCodecMismatchError, match="values='json'"):
        stores("pickle").open()


def test_a_store_partition_open_twice_in_a_process_is_shared(tmp_path: Path) -> None:
    registry = OpenStores()
    first = registry.acquire("rocksdb", tmp_path / "p0")
    second = registry.acquire("rocksdb", tmp_path / "p0")  # a second open would hit its lock
    assert first is second
    registry.release(tmp_path / "p0")
    first.write({b"k": b"v"}, {})  # still open for its other holder
    registry.release(tmp_path / "p0")
    reopened = RocksDBBackend(tmp_path / "p0")
    assert reopened.get(b"k") == b"v"
    reopened.close()


def test_the_changelog_is_named_from_group_topic_and_store() -> None:
    assert changelog_topic("shop", "clicks", "default") == "shop-clicks-default-changelog"
    assert changelog_topic("a b", "t", "s") == "a_b-t-s-changelog"


def test_conveyor_testing_keeps_a_batch_s_writes_only_when_consume_returns() -> None:
    under_test = app()
    under_test.routes.topic("clicks", Counts, state=Store(backend="memory"))
    testing.capture(under_test)
    consumer = testing.consumer_for(under_test, "clicks")
    testing.produce(consumer, payload={"v": "ok"}, key="u1")
    testing.produce(consumer, payload={"v": "ok"}, key="u1")
    testing.consume(consumer)
    testing.produce(consumer, payload={"v": "boom"}, key="u1")
    with pytest.raises(RuntimeError):
        testing.consume(consumer)
    assert consumer.state["u1"] == 2, "the failed batch's count was dropped"


def test_a_restore_written_without_the_wal_and_flushed_survives_a_sigkill(tmp_path: Path) -> None:
    """A restore writes its batches without RocksDB's write-ahead log and flushes at its end:
    the flush must take the changelog offset (kept in a column family of its own) to disk
    too, or a process killed after it restores the whole changelog again on restart."""
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from conveyor.state.backends import RocksDBBackend\n"
        "backend = RocksDBBackend(Path(sys.argv[1]))\n"
        "backend.write({b'k': b'1'}, {'changelog-offset': b'500'}, wal=False)\n"
        "backend.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "db")], check=False)
    assert killed.returncode == -signal.SIGKILL
    backend = RocksDBBackend(tmp_path / "db")
    try:
        assert backend.get(b"k") == b"1"
        assert backend.meta("changelog-offset") == b"500", "the restore's offset was lost"
    finally:
        backend.close()


def test_a_flushed_batch_s_local_writes_survive_a_sigkill(tmp_path: Path) -> None:
    """A flush writes the local store with RocksDB's write-ahead log: a process killed right
    after keeps what it flushed (else its restart replays the changelog from further back)."""
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from conveyor.state import Store\n"
        "from conveyor.state.partition_stores import OpenStores, PartitionStores\n"
        "stores = PartitionStores({'s': Store(backend='rocksdb', changelog=False)}, group='g',\n"
        "    topic='t', partition=0, folder=Path(sys.argv[1]), registry=OpenStores(),\n"
        "    reader=lambda: None)\n"
        "stores.open()\n"
        "stores.views['s']['k'] = 7\n"
        "stores.flush(None)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False)
    assert killed.returncode == -signal.SIGKILL
    backend = RocksDBBackend(tmp_path / "s" / "0")
    try:
        assert backend.get(b"k") == b"7", "the flushed write was lost with the process"
    finally:
        backend.close()
