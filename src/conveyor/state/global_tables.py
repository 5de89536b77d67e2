"""Global tables: every partition of a table's topic read into one store per process
(``app.routes.table("countries", global_table=True)``), for small reference data that every
partition looks up whatever its number: no co-partitioning asked.

The store opens the first time a partition that looks it up is assigned (on the restore
thread, before that partition's first batch): each partition of the topic is read from where
the local files stand (per partition) to its end, and followed after by the tables' follower.
It stays open until the app stops, whatever partitions come and go.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from conveyor.state.errors import ChangelogMismatchError

if TYPE_CHECKING:
    from conveyor.driver.consumers import ConsumerClient
    from conveyor.state.backends import Backend
    from conveyor.state.store import Store
    from conveyor.state.tables import TableFollower

__all__ = ["GlobalTables"]


class _Registry(Protocol):
    """The process's open stores (``OpenStores``): one open per folder."""

    def acquire(self, backend: str, folder: Path) -> Backend: ...

    def release(self, folder: Path) -> bool: ...


_OFFSET = "changelog-offset"
_POLL = 10_000


class GlobalTables:
    """The global tables open in this process, by folder (see the module)."""

    def __init__(
        self,
        registry: _Registry,
        reader: Callable[[], ConsumerClient],
        follower: TableFollower,
    ) -> None:
        self._registry = registry
        self._reader = reader
        self._follower = follower
        self._lock = threading.Lock()
        self._open: dict[Path, Backend] = {}

    def open(self, store: Store, folder: Path) -> Backend:
        """The store of ``store.source``'s every partition in ``folder``: read to the end the
        first time, then followed.

        Raises:
            ChangelogMismatchError: the local files are ahead of the topic (it was recreated):
                delete the folder to read it again.
        """
        source = store.source
        assert source is not None
        with self._lock:
            found = self._open.get(folder)
            if found is not None:
                return found
            backend = self._registry.acquire(store.backend_name, folder)
            try:
                reader = self._reader()
                try:
                    ends = {
                        partition: self._read(reader, source, partition, backend, folder)
                        for partition in reader.partitions(source)
                    }
                finally:
                    reader.close()
            except BaseException:
                self._registry.release(folder)
                raise
            flush = getattr(backend, "flush", None)
            if flush is not None:  # read without the write-ahead log: on disk before it is used
                flush()
            for partition, end in ends.items():
                self._follower.follow(
                    source, partition, backend, end, write=partial(_write, _meta(partition))
                )
            self._open[folder] = backend
            return backend

    def _read(
        self, reader: ConsumerClient, topic: str, partition: int, backend: Backend, folder: Path
    ) -> int:
        """Replay ``topic``/``partition`` into ``backend`` from where it stands; the offset
        reached."""
        raw = backend.meta(_meta(partition))
        start = int(raw) if raw else 0
        low, high = reader.query_watermarks(topic, partition)
        if start > high or 0 < start < low:
            raise ChangelogMismatchError(
                f"the global table of {topic} holds partition {partition} up to offset {start}, "
                f"and the topic now spans {low}-{high}: it was recreated or compacted past it. "
                f"Delete {folder} to read it again."
            )
        start = start or low
        if start >= high:
            return start
        reader.assign([(topic, partition, start)])
        end = start
        while True:
            changes: dict[bytes, bytes | None] = {}
            reached = False
            for message in reader.poll_batch(1.0, _POLL):
                if message.error() is not None:
                    reached = reached or reader.fetch_error(message)
                    continue
                key = message.key()
                if key is not None:
                    changes[key] = message.value()
                end = message.offset() + 1
            if reached:  # past the transactions' markers after the last record
                end = max(end, reader.position(topic, partition) or 0)
            backend.write(changes, {_meta(partition): str(end).encode()}, wal=False)
            if reached:
                return end


def _meta(partition: int) -> str:
    return f"{_OFFSET}-{partition}"


def _write(meta: str, backend: Backend, changes: dict[bytes, bytes | None], end: int) -> None:
    """A followed partition's new records, with the write-ahead log (a killed process keeps
    them)."""
    backend.write(changes, {meta: str(end).encode()})
