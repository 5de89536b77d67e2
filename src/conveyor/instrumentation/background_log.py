"""``BackgroundLog``: log records written by one background thread.

The listener's thread runs librdkafka's callbacks (errors, logs, rebalances) and the monitor's
listeners; if it wrote log lines itself, a slow or blocked stderr would stall consumption.
Records are made on the calling thread (so their time and thread name are right) and handed
to a queue; one daemon thread passes them to the loggers' handlers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["BACKGROUND_LOG", "BackgroundLog"]


class BackgroundLog:
    """A queue of log records and the thread that writes them (started on first use)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[logging.Logger, logging.LogRecord]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._written = threading.Condition(self._lock)
        self._submitted = 0
        self._done = 0
        self._thread: threading.Thread | None = None

    def log(
        self,
        logger: logging.Logger,
        level: int,
        message: str,
        *args: Any,
        exc_info: BaseException | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Like ``logger.log(level, message, *args, extra=extra)``, without waiting for the
        handlers."""
        if not logger.isEnabledFor(level):
            return
        error = (type(exc_info), exc_info, exc_info.__traceback__) if exc_info else None
        record = logger.makeRecord(
            logger.name, level, "conveyor", 0, message, args, error, extra=extra
        )
        with self._lock:
            self._submitted += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="conveyor-log", daemon=True)
                self._thread.start()
        self._queue.put((logger, record))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every record handed over so far was written; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._written:
            target = self._submitted
            return self._written.wait_for(
                lambda: self._done >= target, timeout=max(0.0, deadline - time.monotonic())
            )

    def _run(self) -> None:
        while True:
            logger, record = self._queue.get()
            with contextlib.suppress(Exception):  # a broken handler must not end the writer
                logger.handle(record)
            with self._written:
                self._done += 1
                self._written.notify_all()

    def _after_fork(self) -> None:
        # The writer thread does not exist in a forked child: start a new one on first use.
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._written = threading.Condition(self._lock)
        self._submitted = self._done = 0
        self._thread = None


BACKGROUND_LOG = BackgroundLog()
"""The process's one background log writer."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=BACKGROUND_LOG._after_fork)
