"""Tables: a compacted topic read into the stores of the partitions that look it up.

``app.routes.table("customers")`` declares a topic as a table; a route that names it
(``app.routes.topic("orders", Enrich, tables=["customers"])``) reads it in its consumer as
``self.tables["customers"]``: partition ``p`` of the table for partition ``p`` of the stream
(co-partitioned: both topics keyed alike, with as many partitions, checked at start). The
table's own topic is its changelog: nothing is copied. A table partition is opened like a
store partition, before the stream partition's first batch (restored from its topic to the
end, on the restore thread, so a lookup never reads a table still restoring), and from then
on :class:`TableFollower` keeps it up to date with its topic, a moment behind it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.driver.consumers import ConsumerClient
    from conveyor.state.backends import Backend

__all__ = ["TableFollower"]

_log = logging.getLogger("conveyor.state")

_POLL = 0.2
"""Seconds one poll of the follower waits for records (it checks for new partitions between)."""
_BATCH = 10_000


class _Followed:
    __slots__ = ("backend", "next_offset", "rows", "write")

    def __init__(
        self,
        backend: Backend,
        next_offset: int,
        write: Callable[..., None],
        rows: Callable[[Any], tuple[bytes, bytes]] | None,
    ) -> None:
        self.backend = backend
        self.next_offset = next_offset
        self.write = write
        self.rows = rows


class TableFollower:
    """One thread with a reader of its own that writes each followed table partition's new
    records into its stores (see the module). Started on the first :meth:`follow`. One topic
    partition may feed several stores (two routes looking up one table, a global table)."""

    def __init__(
        self,
        reader: Callable[[], ConsumerClient],
        write: Callable[[Backend, dict[bytes, bytes | None], int], None],
        name: str = "conveyor-tables",
    ) -> None:
        """``write(backend, changes, next_offset)`` writes records and where they reached."""
        self._reader = reader
        self._write = write
        self._name = name
        self._changed = threading.Condition()
        self._followed: dict[tuple[str, int], list[_Followed]] = {}
        self._reassign = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def follow(
        self,
        topic: str,
        partition: int,
        backend: Backend,
        next_offset: int,
        write: Callable[[Backend, dict[bytes, bytes | None], int], None] | None = None,
        rows: Callable[[Any], tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Keep ``backend`` up to date with ``topic``/``partition`` from ``next_offset`` on
        (``write``: how, when not the follower's own way; ``rows``: the key and value a
        record is kept under, when not its own: a joined stream's)."""
        with self._changed:
            if self._closed:
                return
            targets = self._followed.setdefault((topic, partition), [])
            targets.append(_Followed(backend, next_offset, write or self._write, rows))
            self._reassign = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def unfollow(self, topic: str, partition: int, backend: Backend) -> None:
        """Stop writing ``backend`` (its partition is closed here): never written after."""
        with self._changed:
            targets = self._followed.get((topic, partition), [])
            kept = [target for target in targets if target.backend is not backend]
            if len(kept) != len(targets):
                self._reassign = True
                if kept:
                    self._followed[(topic, partition)] = kept
                else:
                    del self._followed[(topic, partition)]

    def close(self, timeout: float = 10.0) -> None:
        with self._changed:
            self._closed = True
            self._followed.clear()
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        client: ConsumerClient | None = None
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: self._followed or self._closed)
                    if self._closed:
                        return
                    positions = None
                    if self._reassign:
                        self._reassign = False
                        positions = [
                            (topic, partition, min(t.next_offset for t in targets))
                            for (topic, partition), targets in self._followed.items()
                        ]
                if client is None:
                    client = self._reader()
                if positions is not None:
                    client.assign(positions)
                self._apply(client.poll_batch(_POLL, _BATCH))
        except Exception:
            _log.exception("the tables' follower stopped; tables no longer follow their topics")
        finally:
            if client is not None:
                client.close()

    def _apply(self, batch: list[Any]) -> None:
        if not batch:
            return
        records: dict[tuple[str, int], list[Any]] = {}
        for raw in batch:
            if raw.error() is not None or raw.key() is None:
                continue  # the end of a partition; a record without a key is no table row
            records.setdefault((raw.topic(), raw.partition()), []).append(raw)
        # under the lock: a store let go (unfollow) is never written after, so it can be
        # closed at once
        with self._changed:
            for where, found in records.items():
                for target in self._followed.get(where, ()):
                    # each store from where it stands (the read starts at the lowest of them)
                    new = [raw for raw in found if raw.offset() >= target.next_offset]
                    if not new:
                        continue
                    rows = target.rows
                    changes: dict[bytes, bytes | None] = (
                        {raw.key(): raw.value() for raw in new}
                        if rows is None
                        else dict(rows(raw) for raw in new)
                    )
                    end = found[-1].offset() + 1
                    try:
                        target.write(target.backend, changes, end)
                    except Exception:
                        _log.exception("table %s/%s: its new records could not be written", *where)
                        self._reassign = True  # read them again, from where it stands
                        continue
                    target.next_offset = end
