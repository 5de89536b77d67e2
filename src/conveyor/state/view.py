"""A store partition as a consumer sees it: a mapping whose writes wait for the batch's end.

Reads see the batch's own writes first, then the writes of the batches before it that are
not flushed yet, then the backend. Writes are kept as Python objects in a write-set, one entry
per key however often it is written; a batch that ends well keeps its writes with the
unflushed ones (:meth:`State.keep`), and a flush (every ``state_flush_interval``, and when
the partition's job ends) encodes each written key once, sends it to the changelog and writes
the backend in one batch (:meth:`State.changes`, :meth:`State.applied`). A batch that fails
drops its own writes only (:meth:`State.discard`): the store holds only what was flushed.

A value read and changed in place (``state["k"].append(1)``) is not written: assign it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, Protocol

from conveyor.state.backends import Backend
from conveyor.state.store import Store

__all__ = ["State", "StreamBuffer", "TableView"]


class _Deleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<deleted>"


_DELETED: Any = _Deleted()
_MISSING: Any = object()  # not in a layer of writes


class Layer(Protocol):
    """Writes that a reader of a store holds itself until the store's flush (a window's open
    windows, :class:`~conveyor.state.open_windows.OpenWindows`): the store asks for them as it
    flushes and tells the layer how each batch ended. The store's reads (``get``, iteration)
    do not see them before the flush: the layer's owner reads its own. A layer keeps no
    "kept" apart from the running batch's changes: a joint transaction's commit
    (``changes(kept_only=True)``) takes all of them, so its owner writes inside the blocks."""

    @property
    def dirty(self) -> bool: ...

    @property
    def kept(self) -> int: ...

    def changes(
        self, encode_key: Callable[[Any], bytes], encode: Callable[[Any], bytes]
    ) -> dict[bytes, bytes | None]: ...

    def keep(self) -> None: ...

    def applied(self) -> None: ...

    def discard(self) -> None: ...

    def discard_all(self) -> None: ...


class State(MutableMapping[Any, Any]):
    """One partition's store (``self.state`` in a consumer): a mutable mapping.

    ``len()`` and iteration walk the whole store partition; ``get`` and ``[]`` read one key.
    Writes become durable with the batch: on a crash before its end they are gone, and the
    batch runs again.
    """

    __slots__ = (
        "_backend",
        "_created",
        "_decode",
        "_decode_key",
        "_encode",
        "_encode_key",
        "_kept",
        "_layers",
        "_unsure",
        "_writes",
        "generation",
        "late",
        "name",
    )

    def __init__(self, name: str, store: Store, backend: Backend) -> None:
        self.name = name
        self._backend = backend
        self._writes: dict[Any, Any] = {}
        self._kept: dict[Any, Any] = {}  # earlier batches' writes, not flushed yet
        # keys written by create() since the last flush: the backend does not hold them, so
        # deleting one before the flush leaves nothing to write
        self._created: set[Any] = set()
        # a flush failed since the last that went well: its records may be in the changelog
        # and not in the backend, so create() cannot know a key is absent from both
        self._unsure = False
        self._layers: list[Layer] = []
        self.generation = 0
        """Counts the times writes were dropped: what a reader built from this store's
        contents in memory (a window's index of closing times) is stale when it changed."""
        self.late = 0
        """The messages its window or join left out as late, since the partition came here
        (the Stores page shows them)."""
        self._encode = store.codec.encode
        self._decode = store.codec.decode
        self._encode_key = store.key_codec.encode
        self._decode_key = store.key_codec.decode

    read_only = False
    """Whether it is a table's (``self.tables``), written by its topic only."""
    kind = "store"
    """``"store"``, ``"table"`` (``self.tables``) or ``"stream"`` (a join's other side)."""

    # -- the mapping ----------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        value = self._writes.get(key, _MISSING)  # one lookup per layer: the hot path
        if value is _MISSING:
            value = self._kept.get(key, _MISSING)
            if value is _MISSING:
                raw = self._backend.get(self._encode_key(key))
                if raw is None:
                    raise KeyError(key)
                return self._decode(raw)
        if value is _DELETED:
            raise KeyError(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._writes.get(key, _MISSING)
        if value is _MISSING:
            value = self._kept.get(key, _MISSING)
            if value is _MISSING:
                raw = self._backend.get(self._encode_key(key))
                return default if raw is None else self._decode(raw)
        return default if value is _DELETED else value

    def size(self) -> tuple[int, int | None]:
        """The store partition's keys (an estimate for RocksDB) and bytes on disk."""
        return self._backend.size()

    def stored(self, raw_key: bytes) -> bytes | None:
        """What the backend holds for ``raw_key`` (an encoded key), without the writes that
        wait for the next flush: what other processes' queries see."""
        return self._backend.get(raw_key)

    def __setitem__(self, key: Any, value: Any) -> None:
        writes = self._writes
        if key not in writes and key not in self._kept:
            self._encode_key(key)  # a key of the wrong type fails here, not at the flush
        writes[key] = value

    def __delitem__(self, key: Any) -> None:
        if key not in self:
            raise KeyError(key)
        self[key] = _DELETED

    def update(self, other: Any = (), /, **more: Any) -> None:
        """Write each of ``other``'s keys (a mapping or pairs) and ``more``'s: as ``[]=`` does
        one by one, in one call (a window writes its batch's windows so)."""
        rows = other if isinstance(other, dict) and not more else dict(other, **more)
        writes, kept, encode = self._writes, self._kept, self._encode_key
        for key in rows:
            if key not in writes and key not in kept:
                encode(key)  # a key of the wrong type fails here, not at the flush
        writes.update(rows)

    def check_key(self, key: Any) -> None:
        """Raise as a write of ``key`` would if the store cannot keep such a key (nothing is
        written): for a reader that holds its writes itself until the flush (a layer)."""
        self._encode_key(key)

    def create(self, rows: Mapping[Any, Any]) -> None:
        """Write keys the store does not hold (neither flushed nor written since): as
        :meth:`update`, and a key deleted again before the next flush leaves nothing to write,
        no tombstone in the changelog (a window's accumulators, most of which close between
        two flushes). Only for keys known to be absent: a key the store holds would keep its
        old value when deleted so."""
        encode = self._encode_key
        for key in rows:
            encode(key)  # a key of the wrong type fails here, not at the flush
        self._writes.update(rows)
        if not self._unsure:
            self._created.update(rows)

    def remove(self, key: Any) -> None:
        """Delete ``key`` without reading it first (``del`` raises for a key that is not
        there, and reads the disk to find out): for a key you know is there."""
        self[key] = _DELETED

    def __contains__(self, key: object) -> bool:
        writes = self._writes
        if key in writes:
            return writes[key] is not _DELETED
        if key in self._kept:
            return self._kept[key] is not _DELETED
        return self._backend.get(self._encode_key(key)) is not None

    def __iter__(self) -> Iterator[Any]:
        writes = {**self._kept, **self._writes}
        decode_key = self._decode_key
        for raw_key, _value in self._backend.items():
            key = decode_key(raw_key)
            if key not in writes:
                yield key
        for key, value in writes.items():
            if value is not _DELETED:
                yield key

    def __len__(self) -> int:
        return sum(1 for _key in self)

    def __repr__(self) -> str:
        return (
            f"<State {self.name!r}: {len(self._writes)} keys written in this batch,"
            f" {len(self._kept)} kept from the batches before it>"
        )

    # -- the batch's end, and the flush (the partition's) ---------------------------------------

    def add_layer(self, layer: Layer) -> None:
        """Flush ``layer``'s writes with the store's own, and tell it how batches end: for a
        reader that holds what it writes itself until the flush (a window's open windows)."""
        self._layers.append(layer)

    @property
    def dirty(self) -> bool:
        """Whether anything was written since the last flush."""
        return bool(self._writes) or bool(self._kept) or any(layer.dirty for layer in self._layers)

    @property
    def kept(self) -> int:
        """How many keys the batches since the last flush wrote."""
        return len(self._kept) + sum(layer.kept for layer in self._layers)

    def keep(self) -> None:
        """The batch ended well: its writes join the unflushed ones (the next flush's)."""
        for layer in self._layers:
            layer.keep()
        writes = self._writes
        if writes:
            if self._kept:
                self._kept.update(writes)
                writes.clear()
            else:
                self._kept, self._writes = writes, {}

    def changes(self, kept_only: bool = False) -> dict[bytes, bytes | None]:
        """The writes since the last flush, encoded: one entry per key (the batch's own last),
        ``None`` for a deleted key (none for a key :meth:`create` wrote and that was deleted
        since: the backend never held it). ``kept_only``: the kept writes only, not the
        running batch's: for a joint transaction's commit, which runs on another thread while
        the partition's batch may write on outside its block."""
        encode, encode_key, created = self._encode, self._encode_key, self._created
        if kept_only:
            writes = self._kept
        else:
            writes = {**self._kept, **self._writes} if self._kept else self._writes
        changes: dict[bytes, bytes | None] = {}
        for key, value in writes.items():
            if value is not _DELETED:
                changes[encode_key(key)] = encode(value)
            elif key not in created:
                changes[encode_key(key)] = None
        for layer in self._layers:
            changes.update(layer.changes(encode_key, encode))
        return changes

    def commit_to_backend(self) -> None:
        """Write the batch's changes to the backend, with no changelog (``conveyor.testing``'s
        stores)."""
        if self.dirty:
            self._backend.write(self.changes(), {})
            self.applied()

    def applied(self, kept_only: bool = False) -> None:
        """The writes since the last flush (``kept_only``: the kept ones, see :meth:`changes`)
        are in the backend now: reads go there."""
        if kept_only:
            kept, self._kept = self._kept, {}
            self._created.difference_update(kept)
        else:
            self._clear()
        self._unsure = False
        for layer in self._layers:
            layer.applied()

    def _clear(self) -> None:
        self._writes.clear()
        self._kept.clear()
        self._created.clear()

    def discard(self) -> None:
        """The batch failed: forget what it wrote (the earlier batches' writes stay)."""
        if self._writes:
            self.generation += 1
        self._writes.clear()
        for layer in self._layers:
            layer.discard()

    def discard_all(self) -> None:
        """A flush failed, or the partition is gone: forget every write not flushed (their
        batches run again)."""
        if self._writes or self._kept:
            self.generation += 1
        self._clear()
        self._unsure = True
        for layer in self._layers:
            layer.discard_all()


class TableView(State):
    """A table's partition (``self.tables[name]``): read like a store, kept by its topic.

    It holds what its topic held when the partition's first batch began, and follows the
    topic after that (a moment behind it). Writing it raises: produce to the topic instead.
    """

    __slots__ = ()
    read_only = True
    kind = "table"

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError(
            f"table {self.name!r} is read-only: it follows its topic (produce to it to change it)"
        )

    def __delitem__(self, key: Any) -> None:
        raise TypeError(
            f"table {self.name!r} is read-only: it follows its topic (produce a tombstone to it)"
        )

    def update(self, other: Any = (), /, **more: Any) -> None:
        self.__setitem__(None, None)  # read-only: raises as a write does

    def put_from_topic(self, rows: Mapping[Any, Any]) -> None:
        """Write ``rows`` as records of the table's topic would (``None`` deletes): for
        ``conveyor.testing``, where no topic feeds it."""
        self._backend.write(
            {
                self._encode_key(key): None if value is None else self._encode(value)
                for key, value in rows.items()
            },
            {},
        )


class StreamBuffer(TableView):
    """A joined stream's records as a join keeps them (:class:`~conveyor.state.Join`): by
    offset, fed by the stream's topic; the join reads the ones that came since a given offset
    and forgets the ones too old to pair."""

    __slots__ = ()
    kind = "stream"

    def rows_from(self, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The kept records from the (encoded) offset ``start`` on, in offset order."""
        return self._backend.items_from(start)

    def forget(self, raw_keys: list[bytes]) -> None:
        """Delete these kept records (the follower only adds later ones)."""
        self._backend.write(dict.fromkeys(raw_keys), {})

    def put_from_topic(self, rows: Mapping[Any, Any]) -> None:
        """Keep ``rows`` (encoded offset to kept record) as the follower would."""
        self._backend.write(dict(rows), {})
