"""Where one store partition keeps its data: a dict, or a RocksDB database through rocksdict.

A backend holds bytes only and is written in whole batches (:meth:`Backend.write`): the
batch's changes and its bookkeeping (the changelog offset it reached, the codec's name) land
together or not at all, so the store never holds half a batch. Reads see only what was
written; a batch in progress lives in the :class:`~conveyor.state.view.State` above it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from conveyor.errors import ConfigurationError


def _rocksdict() -> Any:
    """rocksdict, imported with the first RocksDB store (``conveyor[state]``)."""
    try:
        return importlib.import_module("rocksdict")
    except ImportError:
        raise ConfigurationError(
            "a rocksdb store needs rocksdict: pip install 'conveyor[state]'", "backend"
        ) from None


__all__ = ["Backend", "MemoryBackend", "RocksDBBackend", "open_backend"]

_META = "conveyor-meta"
"""The column family of the bookkeeping: kept apart from the user's keys."""


class Backend(Protocol):
    """One store partition's data, as bytes."""

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None``."""

    def write(
        self,
        changes: Mapping[bytes, bytes | None],
        meta: Mapping[str, bytes],
        *,
        wal: bool = True,
    ) -> None:
        """Apply ``changes`` (``None``: delete the key) and ``meta`` at once; ``wal=False``:
        skip the write-ahead log (a restore's batches, which a crash replays)."""

    def meta(self, name: str) -> bytes | None:
        """The bookkeeping value ``name`` (``None``: never written)."""

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value, in key order for RocksDB."""

    def items_from(self, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The keys from ``start`` on and their values, in key order."""

    def size(self) -> tuple[int, int | None]:
        """Its keys (RocksDB's estimate) and bytes on disk (``None``: in memory)."""

    def close(self) -> None:
        """Release it (files stay: a later open finds the data)."""


class MemoryBackend:
    """A store partition in a dict: for tests and small state; empty at each open."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._meta: dict[str, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def write(
        self,
        changes: Mapping[bytes, bytes | None],
        meta: Mapping[str, bytes],
        *,
        wal: bool = True,
    ) -> None:
        data = self._data
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        self._meta.update(meta)

    def meta(self, name: str) -> bytes | None:
        return self._meta.get(name)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(self._data.items()))

    def items_from(self, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(sorted(item for item in list(self._data.items()) if item[0] >= start))

    def size(self) -> tuple[int, int | None]:
        return len(self._data), None

    def close(self) -> None:
        pass


class RocksDBBackend:
    """A store partition in a RocksDB database at ``path`` (kept across restarts).

    The changelog is the durable copy, so writes skip ``fsync``; the write-ahead log stays
    on for normal batches (a crash of the process loses nothing RocksDB acknowledged) and is
    off for a restore's batches, which a crash simply replays.
    """

    def __init__(self, path: Path) -> None:
        rocksdict = self._rocksdict = _rocksdict()
        Options = rocksdict.Options
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        self._db: Any = rocksdict.Rdict(
            str(path), options, column_families={_META: Options(raw_mode=True)}
        )
        self._meta_handle: Any = self._db.get_column_family_handle(_META)
        self._meta_view: Any = self._db.get_column_family(_META)
        self._no_wal = rocksdict.WriteOptions()
        self._no_wal.disable_wal = True

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def write(
        self,
        changes: Mapping[bytes, bytes | None],
        meta: Mapping[str, bytes],
        *,
        wal: bool = True,
    ) -> None:
        batch = self._rocksdict.WriteBatch(raw_mode=True)
        for key, value in changes.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        handle = self._meta_handle
        for name, value in meta.items():
            batch.put(name.encode(), value, handle)
        if wal:
            self._db.write(batch)
        else:
            self._db.write(batch, self._no_wal)

    def meta(self, name: str) -> bytes | None:
        value: bytes | None = self._meta_view.get(name.encode())
        return value

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._db.items())

    def items_from(self, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._db.items(from_key=start))

    def flush(self) -> None:
        """Write the memtables to files (after a restore written without the WAL): the data's
        and the changelog offset's (a column family of its own, flushed on its own)."""
        self._db.flush()
        self._meta_view.flush()

    def size(self) -> tuple[int, int | None]:
        db = self._db
        keys = int(db.property_int_value("rocksdb.estimate-num-keys") or 0) if db else 0
        on_disk = sum(f.stat().st_size for f in self.path.glob("*") if f.is_file())
        return keys, on_disk

    def close(self) -> None:
        db = self._db
        if db is None:
            return
        self._db = None
        # rocksdict keeps the database open while a column family's objects live
        self._meta_view.close()
        self._meta_view = self._meta_handle = None
        db.close()


def open_backend(name: str, path: Path) -> Backend:
    """The backend ``name`` (``"rocksdb"`` or ``"memory"``) of one store partition."""
    if name == "memory":
        return MemoryBackend()
    return RocksDBBackend(path)
