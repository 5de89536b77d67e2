"""Where each part of a CDC snapshot was read, and as of when.

A snapshot cut short (the task stopped or died, the database went away) resumes after its
last written row, under a newer database snapshot: its rows come in segments, each read as of
its own LSN. The stream that follows starts at the first segment's LSN, so a change is written
only when it is newer than the snapshot its row was read in: a row read before the cut gets
every change since the first LSN, a row read after it only the changes since the newer one.
Nothing twice, nothing lost (the way Debezium's incremental snapshots use watermarks).

Rows are ordered by table (schema, name), then by their key's columns as text compared byte by
byte (PostgreSQL's ``COLLATE "C"``, which is Python's order of ``str``), so that the snapshot's
``ORDER BY`` and this module agree on which side of a cut a row falls.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

__all__ = ["Position", "Segments"]

Position = tuple[str, str, tuple[str, ...]]
"""A row's place in the snapshot's order: schema, table, its key's columns as text."""


class Segments:
    """The segments of one snapshot: ``cuts`` (the last position of each finished segment and
    the LSN it was read as of, in order) and ``tail``, the LSN of the rows after the last cut
    (the segment being read, or the last one)."""

    def __init__(self, tail: int, cuts: Sequence[tuple[Position, int]] = ()) -> None:
        self.tail = tail
        self.cuts: list[tuple[Position, int]] = list(cuts)
        self._positions = [position for position, _ in self.cuts]

    def cut(self, position: Position, lsn: int) -> None:
        """End the segment being read at ``position`` (its last row written) and read the
        rest as of ``lsn``."""
        self.cuts.append((position, self.tail))
        self._positions.append(position)
        self.tail = lsn

    def lsn_of(self, position: Position) -> int:
        """The LSN the row at ``position`` was read as of."""
        at = bisect.bisect_left(self._positions, position)
        return self.cuts[at][1] if at < len(self.cuts) else self.tail

    def newer(self, position: Position, commit_lsn: int) -> bool:
        """Whether a change committed at ``commit_lsn`` (its transaction's commit record) to
        the row at ``position`` is missing from the snapshot that row was read in."""
        return commit_lsn >= self.lsn_of(position)

    def table_lsns(self, schema: str, table: str) -> list[int]:
        """The LSNs the rows of ``schema.table`` were read as of (one per segment it spans)."""
        lsns = [self.lsn_of((schema, table, ()))]
        for at, ((of_schema, of_table, _), _) in enumerate(self.cuts):
            if (of_schema, of_table) == (schema, table):
                lsns.append(self.cuts[at + 1][1] if at + 1 < len(self.cuts) else self.tail)
        return lsns

    @property
    def spans(self) -> bool:
        """Whether the snapshot was read in more than one segment (else no change needs a
        look: the stream starts where the only segment was read)."""
        return bool(self.cuts)

    def to_json(self) -> dict[str, Any]:
        """The segments as a source offset holds them."""
        return {
            "tail": self.tail,
            "cuts": [[schema, table, list(key), lsn] for (schema, table, key), lsn in self.cuts],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Segments:
        cuts = [((str(s), str(t), tuple(map(str, k))), int(lsn)) for s, t, k, lsn in data["cuts"]]
        return cls(int(data["tail"]), cuts)
