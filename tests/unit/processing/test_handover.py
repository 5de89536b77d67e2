"""A partition revoked mid-batch and assigned again starts its new batches only after the
old batch is over, so two batches of one partition never run at once."""

from __future__ import annotations

import threading
from typing import Any

from conveyor import App, Consumer
from conveyor.processing.listener import Listener
from conveyor.processing.workers import WorkerPool


class FakeRaw:
    """A fetched message as the listener hands it over (pure logic, no broker)."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 0

    def value(self) -> bytes:
        return b"{}"

    def key(self) -> None:
        return None

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)

    def error(self) -> None:
        return None


def test_the_new_owner_waits_for_the_old_batch() -> None:
    release_old = threading.Event()
    old_started = threading.Event()
    seen: list[tuple[str, int]] = []
    new_ran = threading.Event()
    running = threading.Lock()
    overlaps: list[int] = []

    class Orders(Consumer):
        def consume(self) -> None:
            if not running.acquire(blocking=False):  # another batch of this partition runs
                overlaps.append(self.messages.first.offset)
                running.acquire()
            try:
                offset = self.messages.first.offset
                if offset == 0:
                    old_started.set()
                    release_old.wait(10)
                seen.append(("batch", offset))
                if offset == 1:
                    new_ran.set()
            finally:
                running.release()

    app = App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"})
    route = app.routes.topic("orders", Orders)
    crashes: list[BaseException] = []
    pool = WorkerPool(2, "unit", crashes.append)
    listener = Listener(app, "unit", "group", [route], pool.submit)
    try:
        old = listener._executor("orders", 0)
        assert old is not None
        old.add([FakeRaw(0)])
        assert old_started.wait(10)
        listener._lose([("orders", 0)], commit=False)  # revoked while batch 0 runs
        new = listener._executor("orders", 0)  # ...and assigned again
        assert new is not None
        assert new is not old
        new.add([FakeRaw(1)])
        assert not new_ran.wait(0.3), "the new owner waits for the old batch"
        release_old.set()
        assert new_ran.wait(10)
        assert seen == [("batch", 0), ("batch", 1)]
        assert overlaps == [], "two batches of one partition ran at once"
        assert not crashes
    finally:
        release_old.set()
        pool.stop(5)
        listener.client.close()


def test_no_wait_when_the_old_batch_is_already_over() -> None:
    done = threading.Event()

    class Orders(Consumer):
        def consume(self) -> None:
            done.set()

    app = App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"})
    route = app.routes.topic("orders", Orders)
    pool = WorkerPool(1, "unit", lambda error: None)
    listener = Listener(app, "unit", "group", [route], pool.submit)
    try:
        listener._lose([("orders", 0)], commit=False)
        fresh: Any = listener._executor("orders", 0)
        fresh.add([FakeRaw(5)])
        assert done.wait(5)
    finally:
        pool.stop(5)
        listener.client.close()
