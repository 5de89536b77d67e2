"""The stores of one assigned partition: opened (and restored from their changelogs) before its
first batch, written at the end of each batch, closed when the partition goes.

A flush (:meth:`PartitionStores.flush`, every ``state_flush_interval`` and when the
partition's backlog runs dry): each store's writes since the last flush are encoded once per
key and produced to the store's changelog partition (the input's partition number), and only
when the broker acknowledged all of it is the local backend written, in one batch with the
changelog offset reached. The offsets of the batches it covers are marked after that. So the
local copy never holds what the changelog lacks, and a crash at any point loses nothing: the
batches since the last flush run again (at least once) and write the same keys again.

A store partition is opened once per process even when the partition is revoked and assigned
again while its last batch runs (:class:`OpenStores` counts who holds it): RocksDB allows one
open per folder.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.state.backends import Backend, RocksDBBackend, open_backend
from conveyor.state.changelogs import changelog_topic
from conveyor.state.errors import ChangelogMismatchError, StateError, StoreCodecMismatchError
from conveyor.state.joins import stream_row
from conveyor.state.store import Store
from conveyor.state.view import State, StreamBuffer, TableView

if TYPE_CHECKING:
    from conveyor.driver.handles import BatchDeliveryHandle
    from conveyor.state.global_tables import GlobalTables
    from conveyor.state.tables import TableFollower

__all__ = ["OpenStores", "PartitionStores", "Restored", "view_class", "write_with_offset"]

_log = logging.getLogger("conveyor.state")

_CHANGELOG_OFFSET = "changelog-offset"
_CODEC = "codec"
_RESTORE_BATCH_BYTES = 4 << 20
"""A restore writes the backend in batches of about this many bytes: rocksdict's ``write``
holds the GIL, so the app's other threads wait for each."""
_RESTORE_POLL = 10_000

Staged = list[tuple[str, dict[bytes, bytes | None], "BatchDeliveryHandle | None"]]
"""What :meth:`PartitionStores.stage` sent: per store, its changes and the delivery handle of
its changelog records (``None``: a store without a changelog)."""


@dataclass(frozen=True)
class Restored:
    """What opening a store partition replayed from its changelog."""

    store: str
    records: int
    bytes: int
    seconds: float
    start: int
    end: int


class _Opened:
    __slots__ = ("backend", "holders")

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.holders = 1


class OpenStores:
    """The store partitions open in this process, by folder, each with how many hold it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Path, _Opened] = {}

    def acquire(self, backend: str, folder: Path) -> Backend:
        with self._lock:
            opened = self._open.get(folder)
            if opened is not None:
                opened.holders += 1
                return opened.backend
            made = open_backend(backend, folder)
            self._open[folder] = _Opened(made)
            return made

    def shared(self, folder: Path) -> bool:
        """Whether more than one holds ``folder``'s store partition open."""
        with self._lock:
            opened = self._open.get(folder)
            return opened is not None and opened.holders > 1

    def release(self, folder: Path) -> bool:
        """Let go of ``folder``'s store partition; whether that closed it (no holder left)."""
        with self._lock:
            opened = self._open.get(folder)
            if opened is None:
                return True
            opened.holders -= 1
            if opened.holders:
                return False
            del self._open[folder]
            backend = opened.backend
        backend.close()
        return True

    def close_all(self) -> None:
        with self._lock:
            opened, self._open = list(self._open.values()), {}
        for entry in opened:
            entry.backend.close()


class PartitionStores:
    """The declared stores of one topic-partition (see the module)."""

    def __init__(
        self,
        declared: Mapping[str, Store],
        *,
        group: str,
        topic: str,
        partition: int,
        folder: Path,
        registry: OpenStores,
        reader: Callable[[], Any],
        cancelled: Callable[[], bool] = lambda: False,
        on_restored: Callable[[str, int, Restored], None] | None = None,
        on_progress: Callable[[PartitionStores, str, int, int, int, int], None] | None = None,
        follower: TableFollower | None = None,
        global_tables: GlobalTables | None = None,
    ) -> None:
        self.declared = dict(declared)
        self._follower = follower
        self._global_tables = global_tables
        self.group = group
        self.topic = topic
        self.partition = partition
        self.folder = folder
        self._registry = registry
        self._reader = reader
        self._cancelled = cancelled
        self._on_restored = on_restored
        self._on_progress = on_progress
        self.views: dict[str, State] = {}
        self._held: dict[str, tuple[Path, Backend]] = {}  # the open stores' folders, backends
        # open() (the restore thread) and close() (the partition's end) may meet: a store
        # opened after close() is let go at once
        self._lock = threading.Lock()
        self._closed = False
        # virtual partitions: each lane's write sets, and one lane's flush at a time (the
        # changelog offset a flush writes must not pass what another lane has not written)
        self._lanes: dict[int, dict[str, State]] = {}
        self._flushing = threading.Lock()

    def _gone(self) -> bool:
        return self._closed or self._cancelled()

    @property
    def closed(self) -> bool:
        """Whether the partition went from here (its stores let go)."""
        return self._closed

    def offset(self, name: str) -> int | None:
        """The changelog offset store ``name``'s local copy reached (``None``: not open)."""
        held = self._held.get(name)
        if held is None:
            return None
        raw = held[1].meta(_CHANGELOG_OFFSET)
        return int(raw) if raw else 0

    def flushed(self, name: str, raw_key: bytes) -> bytes | None:
        """What the local copy of store ``name`` holds for ``raw_key`` (flushed or committed:
        not a running batch's writes), raw; ``None``: nothing."""
        view = self.views.get(name)
        if view is None:
            raise KeyError(name)
        return view.stored(raw_key)

    @property
    def opened(self) -> bool:
        return len(self.views) == len(self.declared)

    def open(self) -> list[Restored]:
        """Open each store partition and replay its changelog from where the local copy
        stands (all of it for a memory store); what was replayed, per store.

        Raises:
            StoreCodecMismatchError: the files were written with another value codec.
            ChangelogMismatchError: the local copy is ahead of its changelog.
            KafkaError: the changelog could not be read.
        """
        done: list[Restored] = []
        for name, store in self.declared.items():
            if name in self.views:
                continue
            if store.global_table:  # the process's one copy: open until the app stops
                assert self._global_tables is not None
                shared = self._global_tables.open(store, self.folder.parent / "_global" / name)
                with self._lock:
                    if self._gone():
                        break
                    self.views[name] = TableView(name, store, shared)
                continue
            folder = self.folder / name / str(self.partition)
            backend = self._registry.acquire(store.backend_name, folder)
            try:
                self._check_codec(name, store, backend, folder)
                raw = backend.meta(_CHANGELOG_OFFSET)
                offset = int(raw) if raw else 0
                restored = None
                if store.changelog:
                    try:
                        restored = self._restore(name, backend, offset, folder)
                    except ChangelogMismatchError as mismatch:
                        if not store.rebuild:
                            raise
                        backend = self._emptied(name, store, folder, mismatch)
                        restored = self._restore(name, backend, 0, folder)
                    done.append(restored)
            except BaseException:
                self._registry.release(folder)
                raise
            with self._lock:
                gone = self._gone()
                if not gone:
                    self._held[name] = (folder, backend)
                    view = view_class(store)
                    self.views[name] = view(name, store, backend)
                    if store.source is not None and self._follower and restored is not None:
                        rows = stream_row if store.stream else None
                        self._follower.follow(
                            store.source, self.partition, backend, restored.end, rows=rows
                        )
            if gone:  # revoked or closed mid-restore: the progress written is kept
                self._registry.release(folder)
                break
        if self._on_restored is not None:
            for restored in done:
                self._on_restored(self.topic, self.partition, restored)
        return done

    def rebuild(self, names: list[str]) -> list[Restored]:
        """Delete the local copies of stores ``names`` and restore each from its changelog, as
        :meth:`open` restores a store with no local copy. The partition's own job runs it,
        between batches (the writes kept for a flush flushed first): nothing writes them
        meanwhile; a lookup meanwhile finds nothing here.

        Raises:
            StateError: a store has no changelog or is a global table (nothing of this
                partition's own to rebuild), or is open for another holder still (the
                partition's previous owner's last batch: try again).
        """
        for name in names:
            store = self.declared[name]
            if store.global_table or not store.changelog:
                why = (
                    "is a global table: the process's one copy, rebuilt by a restart without "
                    "its folder"
                    if store.global_table
                    else "has no changelog to rebuild it from"
                )
                raise StateError(f"store {name!r} of {self.topic}/{self.partition} {why}")
            held = self._held.get(name)
            if held is not None and self._registry.shared(held[0]):
                raise StateError(
                    f"store {name!r} of {self.topic}/{self.partition} is still open for the "
                    "partition's previous owner here: try again in a moment"
                )
        generations: dict[str, int] = {}
        for name in names:
            with self._lock:
                if self._closed:
                    return []
                held = self._held.pop(name, None)
                view = self.views.pop(name, None)
                if view is not None:
                    view.discard_all()
                    generations[name] = view.generation + 1  # what readers built is stale
                source = self.declared[name].source
                if held is not None and source is not None and self._follower is not None:
                    self._follower.unfollow(source, self.partition, held[1])
            if held is not None:
                self._registry.release(held[0])
                shutil.rmtree(held[0], ignore_errors=True)
        done = self.open()
        for name, generation in generations.items():
            view = self.views.get(name)
            if view is not None:
                view.generation = generation
        return done

    def _emptied(
        self, name: str, store: Store, folder: Path, mismatch: ChangelogMismatchError
    ) -> Backend:
        """``Store(rebuild=True)``: the local files that do not fit the changelog deleted, and
        the store opened again empty (to be restored from all the changelog holds)."""
        if not self._registry.release(folder):  # another holder has it open: not deletable
            self._registry.acquire(store.backend_name, folder)
            raise mismatch
        _log.warning("%s; rebuilding it from the changelog (Store(rebuild=True))", mismatch)
        shutil.rmtree(folder, ignore_errors=True)
        backend = self._registry.acquire(store.backend_name, folder)
        self._check_codec(name, store, backend, folder)
        return backend

    def _check_codec(self, name: str, store: Store, backend: Backend, folder: Path) -> None:
        written = backend.meta(_CODEC)
        if written is None:
            backend.write({}, {_CODEC: store.codec.name.encode()})
        elif written.decode() != store.codec.name:
            raise StoreCodecMismatchError(
                f"store {name!r} of {self.topic}/{self.partition} was written with values="
                f"{written.decode()!r}, and is declared with values={store.codec.name!r} "
                f"(its folder: {folder})"
            )

    def _restore(self, name: str, backend: Backend, start: int, folder: Path) -> Restored:
        """Replay the changelog partition (a table's: its topic) from ``start`` to its end
        (read committed)."""
        topic = self.declared[name].source or changelog_topic(self.group, self.topic, name)
        began = time.monotonic()
        reader = self._reader()
        try:
            low, high = reader.query_watermarks(topic, self.partition)
            if start > high:
                raise ChangelogMismatchError(
                    f"store {name!r} of {self.topic}/{self.partition} holds the changelog "
                    f"{topic} up to offset {start}, but the changelog ends at {high}: it was "
                    f"deleted or recreated. Delete {folder} to rebuild the store from it (or "
                    "declare Store(rebuild=True))."
                )
            if start == 0:
                start = low  # nothing local: all the changelog holds
            elif start < low:
                raise ChangelogMismatchError(
                    f"store {name!r} of {self.topic}/{self.partition}: the changelog {topic} "
                    f"now starts at {low}, after the local copy's offset {start}: records it "
                    f"lacks were deleted. Delete {folder} to rebuild the store from the changelog "
                    "(or declare Store(rebuild=True))."
                )
            if start == high:
                return Restored(name, 0, 0, time.monotonic() - began, start, start)
            records, size, end = self._replay(reader, topic, backend, start, high, name)

        finally:
            reader.close()
        if isinstance(backend, RocksDBBackend):
            backend.flush()  # written without the WAL: on disk before anyone relies on it
        seconds = time.monotonic() - began
        _log.info(
            "%s/%s: store %r restored %s records (%s bytes) from %s in %.2f s",
            *(self.topic, self.partition, name, records, size, topic, seconds),
        )
        return Restored(name, records, size, seconds, start, end)

    def _replay(
        self, reader: Any, topic: str, backend: Backend, start: int, high: int, name: str
    ) -> tuple[int, int, int]:
        reader.assign([(topic, self.partition, start)])
        rows = stream_row if self.declared[name].stream else None  # a joined stream's records
        changes: dict[bytes, bytes | None] = {}
        pending = records = size = 0
        end = start
        write = backend.write
        reached = False
        last = None  # the last record read: the offset reached is its own plus one
        while not reached and not self._gone():  # revoked: what was written is kept
            for raw in reader.poll_batch(1.0, _RESTORE_POLL):
                if raw.error() is not None:
                    if reader.fetch_error(raw):
                        reached = True
                        break
                    continue
                key = raw.key()
                if key is None:
                    continue  # (a table's topic may hold records without a key: no row)
                if rows is None:
                    changes[key] = value = raw.value()
                else:
                    key, value = rows(raw)
                    changes[key] = value
                records += 1
                if value:
                    pending += len(value)
                last = raw
                if pending >= _RESTORE_BATCH_BYTES:
                    end = last.offset() + 1
                    _write(write, changes, end)
                    size += pending
                    changes, pending = {}, 0
                    if self._on_progress is not None:  # (its progress is kept: written)
                        self._on_progress(self, name, records, size, end, high)
                    if self._gone():
                        break
        if last is not None:
            end = max(end, last.offset() + 1)
        if reached:  # past the transactions' markers after the last record
            end = max(end, reader.position(topic, self.partition) or 0)
        _write(write, changes, end)
        return records, size + pending, end

    # -- a batch's end ------------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether anything was written since the last flush."""
        return any(view.dirty for view in self.views.values())

    @property
    def kept(self) -> int:
        """How many keys the batches since the last flush wrote, over the stores."""
        return sum(view.kept for view in self.views.values())

    def keep(self) -> None:
        """The batch ended well: its writes wait with the earlier ones for the next flush."""
        for view in self.views.values():
            view.keep()

    def flush(self, producer: Any) -> None:
        """Write each store's writes since the last flush to its changelog and, once
        acknowledged, to the backend.

        Raises:
            DeliveryError: a changelog record was not delivered (nothing is written locally;
                the batch fails and runs again).
        """
        self.apply(self.stage(producer))

    def lane_views(self, lane: int) -> dict[str, State]:
        """Lane ``lane``'s views of the stores (virtual partitions): a write set of its own
        over each store partition (what one lane wrote is not seen by the others before its
        batch's flush), the tables shared."""
        with self._lock:
            views = self._lanes.get(lane)
            if views is None:
                views = self._lanes[lane] = {
                    name: State(name, self.declared[name], self._held[name][1])
                    if view.kind == "store"
                    else view
                    for name, view in self.views.items()
                }
        return views

    def flush_lane(self, views: Mapping[str, State], producer: Any) -> None:
        """A lane's batch ended well: its writes to the changelogs and then the stores, one
        lane at a time (as :meth:`flush`).

        Raises:
            DeliveryError: a changelog record was not delivered (nothing is written locally).
        """
        with self._flushing:
            self.apply(self.stage(producer, views), views)

    def stage(
        self, producer: Any, views: Mapping[str, State] | None = None, kept_only: bool = False
    ) -> Staged:
        """Produce each store's writes since the last flush to its changelog with ``producer``
        (inside its transaction, for exactly-once) without waiting: :meth:`apply` waits for
        the acknowledgements (a transaction's commit has them all) and then writes the
        backends. The writes stay meanwhile. ``kept_only``: the kept writes only (a joint
        transaction's commit: see :meth:`State.changes`); give it to :meth:`apply` too."""
        staged: Staged = []
        for name, view in (self.views if views is None else views).items():
            if not view.dirty:
                continue
            changes = view.changes(kept_only)
            sent = None
            if changes and self.declared[name].changelog:  # none: created keys deleted again
                topic = changelog_topic(self.group, self.topic, name)
                messages = [
                    {"topic": topic, "partition": self.partition, "key": k, "payload": v}
                    for k, v in changes.items()
                ]
                messages[-1]["label"] = "last"
                sent = producer.produce_many_async(messages)
            staged.append((name, changes, sent))
        return staged

    def apply(
        self, staged: Staged, views: Mapping[str, State] | None = None, kept_only: bool = False
    ) -> None:
        """Once every changelog record :meth:`stage` sent is acknowledged, write the changes
        to the backends (with the changelog offset each reached): reads go there.

        Raises:
            DeliveryError: a changelog record was not delivered (nothing written locally).
        """
        written = []
        for name, changes, sent in staged:  # every store's records acknowledged first
            meta: dict[str, bytes] = {}
            if sent is not None:
                [report] = sent.wait()  # librdkafka reports each within its message timeout
                meta[_CHANGELOG_OFFSET] = str(report.offset + 1).encode()
            written.append((name, changes, meta))
        for name, changes, meta in written:
            self._held[name][1].write(changes, meta)
            (self.views if views is None else views)[name].applied(kept_only)

    def discard(self) -> None:
        """The batch failed: drop what each store's batch wrote (not the batches' before it)."""
        for view in self.views.values():
            view.discard()

    def discard_all(self) -> None:
        """Drop every write not flushed (a flush failed: their batches run again)."""
        for view in self.views.values():
            view.discard_all()

    def close(self) -> None:
        """The partition is gone from here: let go of its store partitions (files stay)."""
        with self._lock:
            self._closed = True
            held, self._held = self._held, {}
            if self._follower is not None:
                for name, (_folder, backend) in held.items():
                    source = self.declared[name].source
                    if source is not None:
                        self._follower.unfollow(source, self.partition, backend)
            lanes = [view for views in self._lanes.values() for view in views.values()]
            for view in [*self.views.values(), *lanes]:
                view.discard_all()
            self.views.clear()
            self._lanes.clear()
        for folder, _backend in held.values():
            self._registry.release(folder)


def view_class(store: Store) -> type[State]:
    """How a consumer sees a partition of ``store``: a store, a table or a joined stream."""
    if store.source is None:
        return State
    return StreamBuffer if store.stream else TableView


def write_with_offset(backend: Backend, changes: dict[bytes, bytes | None], end: int) -> None:
    """Write ``changes`` and the changelog offset they reach (a table's follower's writes:
    with the write-ahead log, so a process killed keeps what it followed)."""
    backend.write(changes, {_CHANGELOG_OFFSET: str(end).encode()})


def _write(write: Callable[..., None], changes: dict[bytes, bytes | None], end: int) -> None:
    # without the write-ahead log: a crash replays the changelog from the last offset written
    write(changes, {_CHANGELOG_OFFSET: str(end).encode()}, wal=False)
