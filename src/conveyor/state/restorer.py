"""The thread that opens and restores store partitions, off the workers and the listener.

A partition hands its stores here when it is assigned and runs nothing until they are open
(what it fetches waits in its backlog); the other partitions go on meanwhile, on every worker. Restores run one
after another, each with a reader of its own (see
:meth:`~conveyor.state.partition_stores.PartitionStores.open`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from conveyor.state.partition_stores import PartitionStores

__all__ = ["Restorer"]

_log = logging.getLogger("conveyor.state")

Done = Callable[[BaseException | None], None]
"""Called on the restore thread when a partition's stores are open (``None``), or with why
they could not be opened."""


class Restorer:
    """One thread that opens the store partitions handed to it, in order (see the module)."""

    def __init__(self, name: str = "conveyor-state-restore") -> None:
        self._name = name
        self._queue: deque[tuple[PartitionStores, Done]] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, stores: PartitionStores, done: Done) -> None:
        """Open ``stores`` on the restore thread, then call ``done``."""
        with self._changed:
            if self._closed:
                done(None)  # the app stops: the partition is stopped too, and runs nothing
                return
            self._queue.append((stores, done))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queue or self._closed)
                if self._closed:
                    return
                stores, done = self._queue.popleft()
            error: BaseException | None = None
            try:
                stores.open()
            except Exception as exc:
                error = exc
            try:
                done(error)
            except Exception:
                _log.exception("%s/%s: after its restore", stores.topic, stores.partition)

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the restore in progress (the ones waiting are dropped: their
        partitions stop with the app)."""
        with self._changed:
            self._closed = True
            self._queue.clear()
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
