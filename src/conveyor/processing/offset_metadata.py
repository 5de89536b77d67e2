"""``OffsetMetadata``: the metadata string a partition's commits carry (Kafka's OffsetCommit
stores one per partition beside the offset).

The rule, for every path that commits (the listener's commits, ``mark_as_consumed_sync``,
virtual partitions, transactions):

- A mark may give metadata (``mark_as_consumed(message, metadata="...")``); it belongs to the
  offset that mark sets. A commit carries the metadata of the highest mark at or below the
  offset it commits: never metadata given for progress the commit does not include (a lane of
  virtual partitions ahead of the others, a copy not acknowledged yet that holds the offset
  back).
- Metadata sticks: a mark without metadata keeps what the last one gave, and a partition
  starts with what its group had committed (read at assignment), so a commit of this process
  never wipes metadata that a predecessor wrote. ``""`` is how to clear it.
- What the consumer reads (``Consumer.offset_metadata``) is the metadata of the highest mark
  that gave one, else what was committed when the partition was assigned.

Marking without metadata touches none of this: the hot path stays a comparison and an
assignment.
"""

from __future__ import annotations

import threading

__all__ = ["OffsetMetadata"]


class OffsetMetadata:
    """The metadata of one assigned partition's offsets (see the module). Marks come from
    workers (lanes in parallel), commits from the listener's thread."""

    __slots__ = ("_carried", "_carried_at", "_lock", "_top", "_waiting", "latest")

    def __init__(self, committed: str | None = None) -> None:
        self.latest = committed
        """The metadata of the highest mark that gave one (else what the group had committed)."""
        self._top = -1  # the offset that mark set
        self._carried = committed  # what commits carry now
        self._carried_at = -1  # the offset the carried metadata was given for
        self._waiting: dict[int, str] = {}  # next offset -> metadata, not committed yet
        self._lock = threading.Lock()

    def started_with(self, committed: str | None) -> None:
        """What the group had committed for the partition when it was assigned."""
        with self._lock:
            if self._top < 0:
                self.latest = committed
            if self._carried_at < 0:
                self._carried = committed

    def mark(self, next_offset: int, metadata: str) -> None:
        """A mark of everything before ``next_offset`` gave ``metadata`` (call it before the
        marked offset moves, so that a commit that sees the offset sees this too)."""
        with self._lock:
            self._waiting[next_offset] = metadata
            if next_offset >= self._top:
                self._top = next_offset
                self.latest = metadata

    def at(self, offset: int) -> str | None:
        """The metadata a commit of ``offset`` carries (and later commits, until a mark at or
        below a committed offset gives other metadata)."""
        if not self._waiting:
            return self._carried
        with self._lock:
            ready = [given for given in self._waiting if given <= offset]
            if ready:
                highest = max(ready)
                if highest >= self._carried_at:
                    self._carried, self._carried_at = self._waiting[highest], highest
                for given in ready:
                    del self._waiting[given]
            return self._carried
