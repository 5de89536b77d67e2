"""What a route declares about a store: ``Store(...)``, and how its keys and values are encoded.

A store's keys and values are written to its local backend and to its changelog topic as
bytes; the codecs here turn them into bytes and back. The value codec's name is kept in the
store, so that a store opened later with another codec fails by name instead of decoding
garbage.
"""

from __future__ import annotations

import importlib.util
import pickle
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from conveyor.errors import ConfigurationError
from conveyor.serialization import canonical_json, json_dumps, json_loads

__all__ = [
    "DEFAULT_STORE",
    "BackendName",
    "Codec",
    "KeyCodec",
    "Store",
]

BackendName = Literal["rocksdb", "memory"]
"""Where a store partition's data lives: ``"rocksdb"`` (on disk, through rocksdict; survives a
restart, so a restart replays only the changelog's delta) or ``"memory"`` (a dict; restored in
full from the changelog at each assignment)."""


@runtime_checkable
class Codec(Protocol):
    """Turns a store's values into bytes and back; ``name`` is kept with the store."""

    name: str

    def encode(self, value: Any) -> bytes: ...

    def decode(self, raw: bytes) -> Any: ...


class _Json:
    name = "json"

    def encode(self, value: Any) -> bytes:
        return json_dumps(value)

    def decode(self, raw: bytes) -> Any:
        return json_loads(raw)


class _Pickle:
    name = "pickle"

    def encode(self, value: Any) -> bytes:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def decode(self, raw: bytes) -> Any:
        return pickle.loads(raw)


class _Bytes:
    name = "bytes"

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"this store holds bytes (values='bytes'), got {type(value).__name__}")
        return bytes(value)

    def decode(self, raw: bytes) -> Any:
        return raw


_VALUE_CODECS: dict[str, Codec] = {c.name: c for c in (_Json(), _Pickle(), _Bytes())}


class KeyCodec:
    """Turns a store's keys into bytes and back: ``"str"`` keys are their UTF-8 (the message
    keys' default type), ``"bytes"`` keys themselves, ``"json"`` keys a string, a number or a
    tuple of them (a tuple is a JSON array, read back as a tuple)."""

    __slots__ = ("decode", "encode", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.encode: Callable[[Any], bytes]
        self.decode: Callable[[bytes], Any]
        if name == "str":
            self.encode = _encode_str
            self.decode = _decode_str
        elif name == "bytes":
            self.encode = _encode_bytes
            self.decode = bytes
        else:
            self.encode = _encode_json
            self.decode = _decode_json


def _encode_str(key: Any) -> bytes:
    if type(key) is not str:
        raise TypeError(
            f"this store's keys are str (keys='str'), got {type(key).__name__} {key!r}; "
            "declare Store(keys='bytes') or Store(keys='json') for other keys"
        )
    return key.encode()


def _decode_str(raw: bytes) -> str:
    return raw.decode()


def _encode_bytes(key: Any) -> bytes:
    if not isinstance(key, bytes | bytearray):
        raise TypeError(f"this store's keys are bytes (keys='bytes'), got {type(key).__name__}")
    return bytes(key)


_encode_json = canonical_json


def _decode_json(raw: bytes) -> Any:
    return _hashable(json_loads(raw))


def _hashable(value: Any) -> Any:
    """A JSON array comes back as a tuple: keys must be hashable."""
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    return value


@dataclass(frozen=True)
class Store:
    """A key-value store bound to each partition of a route: ``self.state`` in its consumer.

    Declared on the route (``app.routes.topic("clicks", Counts, state=Store())``, or several by
    name: ``state={"counts": Store(), "seen": Store(values="pickle")}``). Each assigned
    partition has its own store partition; what a batch writes is kept apart until the batch
    is over, then written to the store's changelog topic (compacted, one partition per input
    partition) and to the local backend, once per key.

    Args:
        backend: ``"rocksdb"`` (the default when rocksdict is installed: ``conveyor[state]``)
            or ``"memory"`` (the default without it, and for tests).
        keys: ``"str"`` (the default, as message keys), ``"bytes"`` or ``"json"``.
        values: ``"json"`` (the default), ``"pickle"``, ``"bytes"``, or a :class:`Codec`.
        changelog: ``False`` keeps the store local only: nothing restores it on another
            process, and a memory store starts empty at each assignment.
        rebuild: ``True`` deletes local files that do not fit the changelog (it was deleted
            or recreated, or lost the records they stop at) and rebuilds the store from what
            the changelog holds, with a warning; ``False`` (the default) stops the partition
            with :class:`~conveyor.state.ChangelogMismatchError`, naming the folder.
        source: the topic this store reads as a table (``app.routes.table``): that topic is
            its changelog, read into each partition's store before its first batch and
            followed after; the consumer only reads it.
        global_table: with ``source``: every partition of the topic read into one store per
            process, which every partition that looks it up reads (a small reference table).
        stream: with ``source``: the topic's records kept by offset, not as a table (the
            other side of a :class:`~conveyor.state.Join`, which declares it).
    """

    backend: BackendName | None = None
    keys: Literal["str", "bytes", "json"] = "str"
    values: str | Codec = "json"
    changelog: bool = True
    rebuild: bool = False
    source: str | None = None
    global_table: bool = False
    stream: bool = False
    codec: Codec = field(init=False, repr=False, compare=False)
    key_codec: KeyCodec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.backend not in (None, "rocksdb", "memory"):
            raise ConfigurationError(
                f"Store(backend=...) must be 'rocksdb' or 'memory', got {self.backend!r}",
                "backend",
            )
        if self.backend == "rocksdb" and not rocksdb_available():
            raise ConfigurationError(
                "Store(backend='rocksdb') needs rocksdict: pip install 'conveyor[state]'",
                "backend",
            )
        if self.keys not in ("str", "bytes", "json"):
            raise ConfigurationError(
                f"Store(keys=...) must be 'str', 'bytes' or 'json', got {self.keys!r}", "keys"
            )
        if isinstance(self.values, str):
            if self.values not in _VALUE_CODECS:
                raise ConfigurationError(
                    f"Store(values=...) must be one of {', '.join(sorted(_VALUE_CODECS))} "
                    f"or a codec, got {self.values!r}",
                    "values",
                )
        elif not isinstance(self.values, Codec) or not isinstance(
            getattr(self.values, "name", None), str
        ):
            raise ConfigurationError(
                "Store(values=...) must be a codec name or an object with name, encode and "
                f"decode, got {self.values!r}",
                "values",
            )
        if not isinstance(self.changelog, bool):
            raise ConfigurationError("Store(changelog=...) must be True or False", "changelog")
        if not isinstance(self.rebuild, bool):
            raise ConfigurationError("Store(rebuild=...) must be True or False", "rebuild")
        if self.source is not None and (not isinstance(self.source, str) or not self.source):
            raise ConfigurationError("Store(source=...) must be a topic name", "source")
        if not isinstance(self.global_table, bool) or (self.global_table and not self.source):
            raise ConfigurationError(
                "Store(global_table=...) must be True or False, and True only with a source",
                "global_table",
            )
        if not isinstance(self.stream, bool) or (self.stream and not self.source):
            raise ConfigurationError(
                "Store(stream=...) must be True or False, and True only with a source", "stream"
            )
        codec = _VALUE_CODECS[self.values] if isinstance(self.values, str) else self.values
        object.__setattr__(self, "codec", codec)
        object.__setattr__(self, "key_codec", KeyCodec(self.keys))

    @property
    def kind(self) -> str:
        """``"store"``, ``"table"`` (``source``) or ``"stream"`` (a join's other side), with
        ``global `` before a global table's: what the Stores page calls it."""
        kind = "store" if self.source is None else "stream" if self.stream else "table"
        return f"global {kind}" if self.global_table else kind

    @property
    def backend_name(self) -> BackendName:
        """The backend this store uses: the declared one, else rocksdb when installed."""
        if self.backend is not None:
            return self.backend
        return "rocksdb" if rocksdb_available() else "memory"


DEFAULT_STORE = "default"
"""The name of a route's store declared alone (``state=Store()``)."""

STORE_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""What a store's name may hold (it is part of a topic's and a folder's names)."""


def rocksdb_available() -> bool:
    """Whether rocksdict (``conveyor[state]``) can be imported."""
    return importlib.util.find_spec("rocksdict") is not None
