"""A CDC snapshot read in segments: which segment a row falls in, and which streamed changes
each row still needs (only those newer than the snapshot its segment was read as of)."""

from __future__ import annotations

from conveyor.connect.sources.segments import Segments


def at(table: str, *key: str) -> tuple[str, str, tuple[str, ...]]:
    return ("public", table, key)


def test_one_segment_needs_every_change_streamed_after_it() -> None:
    segments = Segments(100)
    assert not segments.spans
    assert segments.lsn_of(at("a", "7")) == 100
    assert segments.newer(at("a", "7"), 100)
    assert not segments.newer(at("a", "7"), 99)


def test_rows_up_to_a_cut_belong_to_the_older_segment_the_rest_to_the_newer() -> None:
    segments = Segments(100)
    segments.cut(at("b", "20"), 300)
    segments.cut(at("c", "5"), 500)
    assert segments.spans
    assert segments.lsn_of(at("a", "99")) == 100, "an earlier table: read in the first"
    assert segments.lsn_of(at("b", "20")) == 100, "the cut's own row: read before it"
    assert segments.lsn_of(at("b", "3")) == 300, "'3' > '20' as text: after the cut"
    assert segments.lsn_of(at("c", "4")) == 300
    assert segments.lsn_of(at("c", "6")) == 500
    assert segments.lsn_of(at("d", "0")) == 500
    change = 200  # committed between the first and the second snapshot
    assert segments.newer(at("b", "1"), change), "read at 100: the change is news"
    assert not segments.newer(at("b", "3"), change), "read at 300: it has the change"
    assert segments.newer(at("d", "0"), 500)


def test_segments_survive_a_source_offset() -> None:
    segments = Segments(100)
    segments.cut(("s", "t", ("1", "x")), 300)
    again = Segments.from_json(segments.to_json())
    assert again.cuts == segments.cuts
    assert again.tail == 300
    assert again.lsn_of(("s", "t", ("1", "w"))) == 100
    assert again.lsn_of(("s", "t", ("1", "y"))) == 300
