"""The threads that open and restore store partitions, off the workers and the listener.

A partition hands its stores here when it is assigned and runs nothing until they are open
(what it fetches waits in its backlog); the other partitions go on meanwhile, on every worker.
Up to ``workers`` partitions restore at once, each with a reader of its own (see
:meth:`~conveyor.state.partition_stores.PartitionStores.open`): a restore mostly waits for the
broker's next fetch, so several keep the broker and the machine busy where one leaves them
idle. Two restores of one place (a partition revoked mid-restore and assigned again) never
run at once: the second waits for the first, which stops early, to write what it read.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable

from conveyor.state.partition_stores import PartitionStores

__all__ = ["Restorer"]

_log = logging.getLogger("conveyor.state")

Done = Callable[[BaseException | None], None]
"""Called on a restore thread when a partition's stores are open (``None``), or with why
they could not be opened."""


def _place(stores: PartitionStores) -> Hashable:
    return (stores.group, stores.topic, stores.partition)


class Restorer:
    """Threads that open the store partitions handed to them, in order, up to ``workers`` at
    once and one at a time per place (see the module)."""

    def __init__(self, name: str = "conveyor-state-restore", workers: int = 4) -> None:
        self._name = name
        self._workers = max(1, workers)
        self._queue: deque[tuple[PartitionStores, Done]] = deque()
        self._busy: set[Hashable] = set()  # the places being restored
        self._changed = threading.Condition()
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def submit(self, stores: PartitionStores, done: Done) -> None:
        """Open ``stores`` on a restore thread, then call ``done``."""
        with self._changed:
            if self._closed:
                done(None)  # the app stops: the partition is stopped too, and runs nothing
                return
            self._queue.append((stores, done))
            if self._idle == 0 and len(self._threads) < self._workers:
                thread = threading.Thread(
                    target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._changed.notify_all()

    def _next(self) -> tuple[PartitionStores, Done] | None:
        """The first waiting partition whose place is not being restored (holding the lock)."""
        for at, (stores, done) in enumerate(self._queue):
            if _place(stores) not in self._busy:
                del self._queue[at]
                self._busy.add(_place(stores))
                return stores, done
        return None

    def _run(self) -> None:
        while True:
            with self._changed:
                self._idle += 1
                try:
                    taken: tuple[PartitionStores, Done] | None = None
                    while not self._closed and (taken := self._next()) is None:
                        self._changed.wait()
                finally:
                    self._idle -= 1
                if taken is None:
                    return  # closed
            stores, done = taken
            error: BaseException | None = None
            try:
                stores.open()
            except Exception as exc:
                error = exc
            try:
                done(error)
            except Exception:
                _log.exception("%s/%s: after its restore", stores.topic, stores.partition)
            with self._changed:
                self._busy.discard(_place(stores))
                self._changed.notify_all()  # a partition waiting for this place may go

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the restores in progress (the ones waiting are dropped: their
        partitions stop with the app)."""
        with self._changed:
            self._closed = True
            self._queue.clear()
            self._changed.notify_all()
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
