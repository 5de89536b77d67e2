"""Small helpers shared by the integration tests (importable: pytest puts tests/ on the path)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from conveyor import App


class Record:
    """What consumers saw, shared across worker threads; waiters wake on every change."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.items: list[Any] = []

    def add(self, *items: Any) -> None:
        with self.changed:
            self.items.extend(items)
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = 60) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self.items), timeout)


@contextmanager
def running(app: App) -> Iterator[App]:
    """Start ``app`` for the block; stop it gracefully after."""
    app.start()
    try:
        yield app
    finally:
        app.stop_and_wait()
