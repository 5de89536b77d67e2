"""One partition's open tumbling or hopping windows, held in memory and written to its store at
the store's flush.

A fixed window's accumulators change with nearly every message, and most windows open and
close between two flushes (a 1 s window under a 1 s flush interval). So they live here, by
window and key, and the store asks for them as it flushes (:class:`OpenWindows` is a layer of
its :class:`~conveyor.state.view.State`): a key's accumulators are written once a flush however
many batches changed them, and a window that opened and closed between two flushes writes
nothing at all, not even a tombstone.

A batch that fails is undone here (the accumulators it replaced and the windows it closed come
back); a flush that fails drops everything not flushed, and the window reads its open windows
from the store again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["OpenWindows"]

Span = tuple[int, int]
"""A window's start and end, milliseconds."""


class OpenWindows:
    """The open fixed windows of one partition: ``spans[(start, end)][key]`` is a key's
    accumulators (a list, replaced, never changed in place: a batch's undo keeps the old one)."""

    __slots__ = (
        "_closed",
        "_dirty",
        "_gone",
        "_stored",
        "_undo",
        "_unsure",
        "reopened",
        "spans",
        "stale",
    )

    def __init__(self) -> None:
        self.spans: dict[Span, dict[Any, list[Any]]] = {}
        self._dirty: dict[Span, set[Any]] = {}  # keys changed since the last flush
        self._stored: dict[Span, set[Any]] = {}  # keys the store holds (flushed)
        self._gone: dict[Span, set[Any]] = {}  # closed windows' stored keys: tombstones
        self._undo: dict[Span, dict[Any, list[Any] | None]] = {}  # the batch's replaced values
        self._closed: list[tuple[Span, dict[Any, list[Any]], set[Any], set[Any]]] = []
        self.stale = True
        """Whether the store must be read again (nothing loaded yet, or a flush failed)."""
        self.reopened = False
        """Whether a failed batch's undo brought closed windows back (to close again)."""
        # a flush failed since the last that went well: some of its records may be in the
        # changelog and not in the store, so every key of a window that closes is deleted
        self._unsure = False

    # -- the window's side ----------------------------------------------------------------------

    def load(self, rows: Iterable[tuple[Span, Any, list[Any]]]) -> None:
        """Start again from what the store holds: ``(span, key, accumulators)`` rows."""
        self._drop()
        for span, key, accumulators in rows:
            held = self.spans.get(span)
            if held is None:
                held = self.spans[span] = {}
                self._dirty[span], self._stored[span] = set(), set()
            held[key] = accumulators
            self._stored[span].add(key)
        self.stale = False

    def open(self, span: Span) -> tuple[dict[Any, list[Any]], bool]:
        """The window's accumulators by key, and whether it is new (opened by this call)."""
        held = self.spans.get(span)
        if held is not None:
            return held, False
        held = self.spans[span] = {}
        self._dirty[span] = set()
        self._stored[span] = set()
        return held, True

    def write(
        self, span: Span, rows: Mapping[Any, list[Any]], was: list[Any] | None = None
    ) -> None:
        """Replace keys' accumulators in the open window ``span`` (see :meth:`open`); ``was``:
        what the window held for ``rows``' keys, in their order, when the caller read it."""
        held = self.spans[span]
        undo = self._undo.get(span)
        if undo is None:
            if was is None:
                was = list(map(held.get, rows))
            self._undo[span] = dict(zip(rows, was, strict=True))
        else:
            for key in rows:
                if key not in undo:
                    undo[key] = held.get(key)
        held.update(rows)
        self._dirty[span].update(rows)

    def close(self, span: Span) -> dict[Any, list[Any]] | None:
        """Take the window ``span`` out (``None``: not open); its keys the store holds are
        deleted at the next flush."""
        held = self.spans.pop(span, None)
        if held is None:
            return None
        dirty, stored = self._dirty.pop(span), self._stored.pop(span)
        self._closed.append((span, held, dirty, stored))
        if self._unsure:
            self._gone[span] = stored | set(held)
        elif stored:
            self._gone[span] = stored
        return held

    # -- the store's side (a layer of State) ----------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether anything changed since the last flush."""
        return any(self._dirty.values()) or bool(self._gone)

    @property
    def kept(self) -> int:
        """How many keys changed since the last flush."""
        return sum(map(len, self._dirty.values())) + sum(map(len, self._gone.values()))

    def changes(
        self, encode_key: Callable[[Any], bytes], encode: Callable[[Any], bytes]
    ) -> dict[bytes, bytes | None]:
        """What changed since the last flush, encoded as the store keeps it: a key's
        accumulators at ``(start, end, key)``, ``None`` for a closed window's stored key."""
        changes: dict[bytes, bytes | None] = {}
        for (start, end), keys in list(self._dirty.items()):
            held = self.spans[start, end]
            for key in list(keys):
                changes[encode_key((start, end, key))] = encode(held[key])
        for (start, end), keys in list(self._gone.items()):
            for key in list(keys):
                changes[encode_key((start, end, key))] = None
        return changes

    def keep(self) -> None:
        """The batch ended well: what it changed stays (for the next flush)."""
        self._undo.clear()
        self._closed.clear()

    def applied(self) -> None:
        """The changes are in the store now (and past undoing)."""
        for span, keys in self._dirty.items():
            self._stored[span].update(keys)
            keys.clear()
        self._gone.clear()
        self._unsure = False
        self.keep()

    def discard(self) -> None:
        """The batch failed: its changes go, the windows it closed come back."""
        for span, held, dirty, stored in reversed(self._closed):
            self.spans[span], self._dirty[span], self._stored[span] = held, dirty, stored
            self._gone.pop(span, None)
            self.reopened = True
        for span, undo in self._undo.items():
            held = self.spans.get(span)
            if held is None:
                continue
            for key, was in undo.items():
                if was is None:
                    del held[key]
                    self._dirty[span].discard(key)
                else:
                    held[key] = was  # still dirty: it changed since the last flush or not
            if not held and not self._stored[span]:
                del self.spans[span], self._dirty[span], self._stored[span]
        self.keep()

    def discard_all(self) -> None:
        """A flush failed or the partition went: everything not flushed goes, at once (a
        flush before the window's next batch finds nothing to write), and the window reads
        its open windows from the store again."""
        self._drop()
        self.stale = True
        self._unsure = True

    def _drop(self) -> None:
        self.spans, self._dirty, self._stored, self._gone = {}, {}, {}, {}
        self._undo, self._closed = {}, []
