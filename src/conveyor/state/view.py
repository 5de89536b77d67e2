"""A store partition as a consumer sees it: a mapping whose writes wait for the batch's end.

Reads see the batch's own writes first, then the backend. Writes are kept as Python objects
in a write-set, one entry per key however often the batch writes it; at the batch's end the
partition encodes each written key once, sends it to the changelog and writes the backend in
one batch (:meth:`State.changes`, :meth:`State.applied`). A batch that fails drops its
write-set (:meth:`State.discard`): the store holds only what was committed.

A value read and changed in place (``state["k"].append(1)``) is not written: assign it back.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from conveyor.state.backends import Backend
from conveyor.state.store import Store

__all__ = ["State"]


class _Deleted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<deleted>"


_DELETED: Any = _Deleted()


class State(MutableMapping[Any, Any]):
    """One partition's store (``self.state`` in a consumer): a mutable mapping.

    ``len()`` and iteration walk the whole store partition; ``get`` and ``[]`` read one key.
    Writes become durable with the batch: on a crash before its end they are gone, and the
    batch runs again.
    """

    __slots__ = (
        "_backend",
        "_decode",
        "_decode_key",
        "_encode",
        "_encode_key",
        "_raw_keys",
        "_writes",
        "name",
    )

    def __init__(self, name: str, store: Store, backend: Backend) -> None:
        self.name = name
        self._backend = backend
        self._writes: dict[Any, Any] = {}
        self._raw_keys: dict[Any, bytes] = {}  # each written key encoded, once per batch
        self._encode = store.codec.encode
        self._decode = store.codec.decode
        self._encode_key = store.key_codec.encode
        self._decode_key = store.key_codec.decode

    # -- the mapping ----------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        writes = self._writes
        if key in writes:
            value = writes[key]
            if value is _DELETED:
                raise KeyError(key)
            return value
        raw = self._backend.get(self._encode_key(key))
        if raw is None:
            raise KeyError(key)
        return self._decode(raw)

    def get(self, key: Any, default: Any = None) -> Any:
        writes = self._writes
        if key in writes:
            value = writes[key]
            return default if value is _DELETED else value
        raw = self._backend.get(self._encode_key(key))
        return default if raw is None else self._decode(raw)

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self._writes:  # a key of the wrong type fails here, not at the batch's end
            self._raw_keys[key] = self._encode_key(key)
        self._writes[key] = value

    def __delitem__(self, key: Any) -> None:
        if key not in self:
            raise KeyError(key)
        self[key] = _DELETED

    def __contains__(self, key: object) -> bool:
        writes = self._writes
        if key in writes:
            return writes[key] is not _DELETED
        return self._backend.get(self._encode_key(key)) is not None

    def __iter__(self) -> Iterator[Any]:
        writes = self._writes
        decode_key = self._decode_key
        for raw_key, _value in self._backend.items():
            key = decode_key(raw_key)
            if key not in writes:
                yield key
        for key, value in list(writes.items()):
            if value is not _DELETED:
                yield key

    def __len__(self) -> int:
        return sum(1 for _key in self)

    def __repr__(self) -> str:
        return f"<State {self.name!r}: {len(self._writes)} keys written in this batch>"

    # -- the batch's end (the partition's) ------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether this batch wrote anything."""
        return bool(self._writes)

    def changes(self) -> dict[bytes, bytes | None]:
        """The batch's writes, encoded: one entry per key, ``None`` for a deleted key."""
        encode, raw_keys = self._encode, self._raw_keys
        return {
            raw_keys[key]: None if value is _DELETED else encode(value)
            for key, value in self._writes.items()
        }

    def commit_to_backend(self) -> None:
        """Write the batch's changes to the backend, with no changelog (``conveyor.testing``'s
        stores)."""
        if self._writes:
            self._backend.write(self.changes(), {})
            self.applied()

    def applied(self) -> None:
        """The batch's writes are in the backend now: reads go there."""
        self._writes.clear()
        self._raw_keys.clear()

    def discard(self) -> None:
        """The batch failed: forget what it wrote."""
        self.applied()
