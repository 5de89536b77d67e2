"""``Backlog``: one partition's fetched messages not yet handed to ``consume()``.

Kept as the runs the listener added (lists straight out of a poll), so that adding a run and
taking a batch cost a few list operations, not Python work per message: a batch is a slice
of a run (or a whole run, uncopied), never a message-by-message pop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

__all__ = ["Backlog"]


class Backlog:
    """Fetched messages of one partition, in offset order. Not thread-safe: its executor
    guards it with its lock."""

    __slots__ = ("_runs", "_start", "size")

    def __init__(self) -> None:
        self._runs: deque[list[Any]] = deque()
        self._start = 0  # messages of the first run already taken
        self.size = 0
        """How many messages it holds (read it: ``len()`` costs a Python call)."""

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[Any]:
        start = self._start
        for run in self._runs:
            yield from run[start:] if start else run
            start = 0

    def extend(self, run: list[Any]) -> None:
        """Add ``run`` (messages after everything held, in order) at the end; the list is
        kept, not copied: the caller hands it over."""
        if run:
            self._runs.append(run)
            self.size += len(run)

    def take(self, limit: int) -> list[Any]:
        """Remove and return up to ``limit`` messages from the front."""
        runs = self._runs
        if not runs:
            return []
        first = runs[0]
        start = self._start
        available = len(first) - start
        if available > limit:
            self._start = start + limit
            self.size -= limit
            return first[start : start + limit]
        runs.popleft()
        self._start = 0
        batch = first[start:] if start else first
        self.size -= available
        while runs and len(batch) < limit:
            room = limit - len(batch)
            following = runs[0]
            if len(following) > room:
                batch = batch + following[:room]  # a copy: the run may be the caller's
                self._start = room
                self.size -= room
                break
            runs.popleft()
            batch = batch + following
            self.size -= len(following)
        return batch

    def put_back(self, messages: list[Any]) -> None:
        """Put ``messages`` (taken earlier, in order) back in front, to be taken again."""
        if not messages:
            return
        if self._start:
            self._runs[0] = self._runs[0][self._start :]
            self._start = 0
        self._runs.appendleft(list(messages))
        self.size += len(messages)

    def first(self) -> Any | None:
        """The message that would be taken next (``None`` when empty)."""
        if not self._runs:
            return None
        return self._runs[0][self._start]

    def clear(self) -> None:
        self._runs.clear()
        self._start = 0
        self.size = 0
