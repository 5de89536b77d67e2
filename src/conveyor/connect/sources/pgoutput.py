"""PostgreSQL's logical replication messages (the ``pgoutput`` plugin, protocol version 1)
decoded from their bytes: a transaction's begin and commit, the relations (tables) its
changes refer to, and each insert, update, delete and truncate with its row images.

Values arrive in PostgreSQL's text format; :func:`typed` turns the common types into Python
values (numbers, booleans, JSON) and leaves the rest as PostgreSQL writes them."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "UNCHANGED",
    "Begin",
    "Change",
    "Column",
    "Commit",
    "Relation",
    "Truncate",
    "decode",
    "lsn_text",
    "pg_time",
    "typed",
]

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's timestamps count from here


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()
"""A TOASTed value an update did not change (PostgreSQL does not send it again)."""


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    key: bool  # part of the replica identity (the primary key by default)


@dataclass(frozen=True)
class Relation:
    oid: int
    schema: str
    table: str
    replica_identity: str  # d (default: primary key), f (full), i (index), n (nothing)
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_time: datetime
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_time: datetime


@dataclass(frozen=True)
class Change:
    """An insert, update or delete of relation ``relation``: ``old`` is the row before
    (only its key columns unless the table's replica identity is ``FULL``; ``None`` when
    PostgreSQL sent none), ``new`` the row after (``None`` for a delete)."""

    kind: str  # insert, update, delete
    relation: int
    old: tuple[Any, ...] | None
    new: tuple[Any, ...] | None


@dataclass(frozen=True)
class Truncate:
    relations: tuple[int, ...]


def pg_time(microseconds: int) -> datetime:
    return _EPOCH + timedelta(microseconds=microseconds)


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL writes it (``16/B374D848``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class _Reader:
    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str:
        end = self.data.index(b"\0", self.at)
        text = self.data[self.at : end].decode()
        self.at = end + 1
        return text

    def tuple_data(self) -> tuple[Any, ...]:
        count = self.take("!H")
        values: list[Any] = []
        for _ in range(count):
            kind = self.data[self.at : self.at + 1]
            self.at += 1
            if kind == b"n":
                values.append(None)
            elif kind == b"u":
                values.append(UNCHANGED)
            else:  # t (text) or b (binary): a length, then the bytes
                length = self.take("!i")
                raw = self.data[self.at : self.at + length]
                self.at += length
                values.append(raw.decode() if kind == b"t" else raw)
        return tuple(values)


def decode(data: bytes) -> Begin | Commit | Relation | Change | Truncate | None:
    """One pgoutput message; ``None`` for the kinds a change stream does not use (type,
    origin, logical decoding messages)."""
    kind = data[:1]
    reader = _Reader(data)
    reader.at = 1
    if kind == b"B":
        final_lsn, time, xid = reader.take("!QqI")
        return Begin(final_lsn, pg_time(time), xid)
    if kind == b"C":
        _flags, commit_lsn, end_lsn, time = reader.take("!BQQq")
        return Commit(commit_lsn, end_lsn, pg_time(time))
    if kind == b"R":
        oid = reader.take("!I")
        schema, table = reader.string(), reader.string()
        identity = chr(reader.take("!B"))
        columns = []
        for _ in range(reader.take("!H")):
            flags = reader.take("!B")
            name = reader.string()
            type_oid, _modifier = reader.take("!Ii")
            columns.append(Column(name, type_oid, bool(flags & 1)))
        return Relation(oid, schema, table, identity, tuple(columns))
    if kind == b"I":
        relation = reader.take("!I")
        reader.at += 1  # N
        return Change("insert", relation, None, reader.tuple_data())
    if kind == b"U":
        relation = reader.take("!I")
        old = None
        marker = data[reader.at : reader.at + 1]
        if marker in (b"K", b"O"):
            reader.at += 1
            old = reader.tuple_data()
        reader.at += 1  # N
        return Change("update", relation, old, reader.tuple_data())
    if kind == b"D":
        relation = reader.take("!I")
        reader.at += 1  # K or O
        return Change("delete", relation, reader.tuple_data(), None)
    if kind == b"T":
        count = reader.take("!I")
        reader.at += 1  # options
        return Truncate(tuple(reader.take("!I") for _ in range(count)))
    return None


_INTEGERS = frozenset({20, 21, 23, 26})  # int8, int2, int4, oid
_FLOATS = frozenset({700, 701})  # float4, float8
_JSON = frozenset({114, 3802})  # json, jsonb


def typed(type_oid: int, text: Any) -> Any:
    """A value of type ``type_oid`` from its text: integers, floats and booleans as Python's,
    JSON parsed, the rest (numeric, dates, times, text ...) as PostgreSQL writes it."""
    if text is None or text is UNCHANGED or not isinstance(text, str):
        return text
    if type_oid in _INTEGERS:
        return int(text)
    if type_oid == 16:
        return text == "t"
    if type_oid in _FLOATS:
        return float(text)
    if type_oid in _JSON:
        return json.loads(text)
    return text
