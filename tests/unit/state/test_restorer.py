"""The restore threads: partitions of different places restore at once (a restore mostly
waits on the broker), two restores of one place never do (the second waits for the first to
finish writing), and closing drops what waits."""

from __future__ import annotations

import threading
from typing import Any

from conveyor.state.restorer import Restorer


class Slow:
    """Stands in for a partition's stores: ``open()`` holds until released."""

    def __init__(self, partition: int, running: list[int], lock: threading.Lock) -> None:
        self.group, self.topic, self.partition = "g", "t", partition
        self.started = threading.Event()
        self.release = threading.Event()
        self._running, self._lock = running, lock
        self.overlapped_same_place = False

    def open(self) -> None:
        with self._lock:
            if self.partition in self._running:
                self.overlapped_same_place = True
            self._running.append(self.partition)
        self.started.set()
        assert self.release.wait(10)
        with self._lock:
            self._running.remove(self.partition)


def test_partitions_restore_at_once_but_one_place_one_at_a_time() -> None:
    running: list[int] = []
    lock = threading.Lock()
    restorer = Restorer(workers=3)
    done: list[tuple[int, Any]] = []
    first, second, again = Slow(0, running, lock), Slow(1, running, lock), Slow(0, running, lock)
    try:
        for stores in (first, again, second):
            restorer.submit(stores, lambda error, s=stores: done.append((s.partition, error)))  # type: ignore[arg-type]
        assert first.started.wait(5)
        assert second.started.wait(5), "another partition does not wait for the first"
        assert not again.started.wait(0.2), "the same place waits while the first restores"
        first.release.set()
        assert again.started.wait(5), "and goes once the first is done"
        second.release.set()
        again.release.set()
        for stores in (first, second, again):
            assert not stores.overlapped_same_place
    finally:
        restorer.close()
    assert sorted(p for p, _ in done) == [0, 0, 1]
    assert all(error is None for _, error in done)


def test_closing_drops_what_waits_and_answers_later_submits() -> None:
    running: list[int] = []
    lock = threading.Lock()
    restorer = Restorer(workers=1)
    busy, waiting = Slow(0, running, lock), Slow(1, running, lock)
    restorer.submit(busy, lambda error: None)  # type: ignore[arg-type]
    restorer.submit(waiting, lambda error: None)  # type: ignore[arg-type]
    assert busy.started.wait(5)
    closer = threading.Thread(target=restorer.close)
    closer.start()
    busy.release.set()
    closer.join(10)
    assert not waiting.started.is_set(), "dropped: its partition stops with the app"
    late: list[Any] = []
    restorer.submit(waiting, late.append)  # type: ignore[arg-type]
    assert late == [None]
