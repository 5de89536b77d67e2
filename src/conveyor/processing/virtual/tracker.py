"""``OffsetTracker``: which of a partition's handed-out messages finished, and so which offset
may be committed.

Lanes finish in any order; the committable offset is the first one not finished yet (or the
offset after the last handed out, once all finished), so a commit never passes a message
that did not finish, whatever the order of completion, gaps in the offsets (compaction,
transaction markers) or duplicate completions.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["OffsetTracker"]


class OffsetTracker:
    """Messages handed out, in offset order, until everything before them finished too.

    Not thread-safe: its executor guards it with its lock."""

    __slots__ = ("_after", "_finished", "_order", "_raws")

    def __init__(self) -> None:
        self._order: deque[int] = deque()  # handed out, ascending, from the first unfinished
        self._raws: dict[int, Any] = {}  # offset -> message, for everything in _order
        self._finished: set[int] = set()  # finished, still behind an unfinished one
        self._after: int | None = None  # the offset after the last one handed out

    def __len__(self) -> int:
        """Messages handed out and not yet behind the committable offset."""
        return len(self._order)

    def hand_out(self, offset: int, message: Any = None) -> bool:
        """Track ``offset`` (handed to a lane). Offsets must grow: an offset at or before the
        last one handed out is refused (returns False), as a duplicate."""
        after = self._after
        if after is not None and offset < after:
            return False
        self._order.append(offset)
        self._raws[offset] = message
        self._after = offset + 1
        return True

    def finish(self, offset: int) -> None:
        """``offset`` finished (unknown or already finished offsets are ignored)."""
        order = self._order
        if offset not in self._raws:
            return
        if order[0] != offset:
            self._finished.add(offset)
            return
        # The first unfinished one finished: move past it and every finished one behind it.
        raws, finished = self._raws, self._finished
        order.popleft()
        del raws[offset]
        while order and order[0] in finished:
            done = order.popleft()
            finished.discard(done)
            del raws[done]

    def is_finished(self, offset: int) -> bool:
        """Whether ``offset`` finished: behind the committable offset, or finished ahead of it."""
        if offset in self._finished:
            return True
        if offset in self._raws:
            return False
        committable = self.committable()
        return committable is not None and offset < committable

    def committable(self) -> int | None:
        """The offset to commit: the first unfinished one handed out, else the one after the
        last handed out (``None``: nothing handed out yet)."""
        if self._order:
            return self._order[0]
        return self._after

    def last(self) -> int | None:
        """The last offset handed out (``None``: none yet)."""
        return None if self._after is None else self._after - 1

    def outstanding(self, include_finished: bool = False) -> list[Any]:
        """The messages not behind the committable offset, in order: the unfinished ones (and
        with ``include_finished``, those finished ahead of an unfinished one)."""
        finished = self._finished
        raws = self._raws
        return [
            raws[offset] for offset in self._order if include_finished or offset not in finished
        ]

    def forget(self) -> None:
        """Drop every message handed out and not finished (a seek re-reads them); the next
        offset handed out may be any."""
        self._order.clear()
        self._raws.clear()
        self._finished.clear()
        self._after = None

    def __repr__(self) -> str:
        return (
            f"<OffsetTracker committable={self.committable()} outstanding={len(self._order)} "
            f"finished_ahead={len(self._finished)}>"
        )
