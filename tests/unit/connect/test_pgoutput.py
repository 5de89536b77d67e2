"""pgoutput messages decoded from bytes as PostgreSQL sends them (protocol version 1), and
their text values typed."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

from conveyor.connect.sources.pgoutput import (
    UNCHANGED,
    Begin,
    Change,
    Column,
    Commit,
    Relation,
    Truncate,
    decode,
    lsn_text,
    typed,
)

MICROS_2026 = int(
    (datetime(2026, 1, 1, tzinfo=UTC) - datetime(2000, 1, 1, tzinfo=UTC)).total_seconds()
    * 1_000_000
)


def tuple_data(*values: str | None) -> bytes:
    out = struct.pack("!H", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value == "toast":
            out += b"u"
        else:
            raw = value.encode()
            out += b"t" + struct.pack("!i", len(raw)) + raw
    return out


def test_a_transaction_s_begin_and_commit() -> None:
    assert decode(b"B" + struct.pack("!QqI", 0x16_B374D848, MICROS_2026, 777)) == Begin(
        0x16_B374D848, datetime(2026, 1, 1, tzinfo=UTC), 777
    )
    assert decode(b"C" + struct.pack("!BQQq", 0, 10, 20, MICROS_2026)) == Commit(
        10, 20, datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert lsn_text(0x16_B374D848) == "16/B374D848"


def test_a_relation_names_its_columns_and_key() -> None:
    raw = (
        b"R"
        + struct.pack("!I", 4242)
        + b"public\0orders\0"
        + b"d"
        + struct.pack("!H", 2)
        + b"\x01id\0"
        + struct.pack("!Ii", 23, -1)
        + b"\x00note\0"
        + struct.pack("!Ii", 25, -1)
    )
    assert decode(raw) == Relation(
        4242, "public", "orders", "d", (Column("id", 23, True), Column("note", 25, False))
    )


def test_inserts_updates_and_deletes_carry_their_row_images() -> None:
    insert = b"I" + struct.pack("!I", 7) + b"N" + tuple_data("1", None)
    assert decode(insert) == Change("insert", 7, None, ("1", None))
    update = (
        b"U" + struct.pack("!I", 7) + b"O" + tuple_data("1", "a") + b"N" + tuple_data("1", "toast")
    )
    assert decode(update) == Change("update", 7, ("1", "a"), ("1", UNCHANGED))
    plain_update = b"U" + struct.pack("!I", 7) + b"N" + tuple_data("2", "b")
    assert decode(plain_update) == Change("update", 7, None, ("2", "b"))
    delete = b"D" + struct.pack("!I", 7) + b"K" + tuple_data("1", None)
    assert decode(delete) == Change("delete", 7, ("1", None), None)
    truncate = b"T" + struct.pack("!I", 2) + b"\x00" + struct.pack("!II", 7, 8)
    assert decode(truncate) == Truncate((7, 8))
    assert decode(b"Y" + b"ignored") is None


def test_text_values_are_typed_by_their_type() -> None:
    assert typed(23, "42") == 42
    assert typed(20, "-9000000000") == -9_000_000_000
    assert typed(16, "t") is True
    assert typed(16, "f") is False
    assert typed(701, "1.5") == 1.5
    assert typed(3802, '{"a": [1]}') == {"a": [1]}
    assert typed(1700, "10.10") == "10.10", "numeric keeps its digits"
    assert typed(1184, "2026-01-01 00:00:00+00") == "2026-01-01 00:00:00+00"
    assert typed(23, None) is None
    assert typed(25, UNCHANGED) is UNCHANGED
