"""Which tasks this worker runs, decided by Kafka's group assignment: every worker of a
connect cluster joins one consumer group on a topic of ``slots`` empty partitions, and task
``t`` of connector ``c`` runs on the worker the group gave slot ``(crc32(c) + t) % slots``.
A worker that joins, leaves or stops heartbeating (killed) moves slots, and so tasks,
between the workers: no coordinator of Conveyor's own, the broker's group coordinator is it.
The cooperative-sticky assignor moves only the slots it must."""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.admin import Admin
from conveyor.connect.runtime.topics import ensure_topic
from conveyor.driver.consumers import ConsumerClient

__all__ = ["Membership", "slot_of"]

_log = logging.getLogger("conveyor.connect")


def slot_of(connector: str, task: int, slots: int) -> int:
    """The slot task ``task`` of ``connector`` runs in (the tasks of one connector in
    consecutive slots, so the group spreads them)."""
    return (zlib.crc32(connector.encode()) + task) % slots


class Membership:
    """This worker's place in the group: the slots it holds now (:attr:`slots`), and
    ``on_change`` called (on the membership's thread) each time they change."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        group: str,
        topic: str,
        slots: int,
        on_change: Callable[[], None],
        *,
        replication_factor: int | None = None,
        session_timeout: float = 10.0,
    ) -> None:
        self.topic = topic
        self.count = slots
        self._kafka = dict(kafka)
        self._group = group
        self._on_change = on_change
        self._replication_factor = replication_factor
        self._session_timeout = session_timeout
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._client: ConsumerClient | None = None
        self._thread: threading.Thread | None = None

    @property
    def slots(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._held)

    def start(self) -> None:
        """Create the slots topic if needed and join the group (on a thread of its own).

        A slots topic made before with another count keeps its count (every worker of the
        cluster must agree on it).
        """
        with Admin(self._kafka) as admin:
            self.count = ensure_topic(admin, self.topic, self.count, self._replication_factor)
        settings = {
            **{k: v for k, v in self._kafka.items() if not k.startswith("group.")},
            "group.id": self._group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": int(self._session_timeout * 1000),
            "heartbeat.interval.ms": max(500, int(self._session_timeout * 1000) // 5),
            "enable.auto.commit": False,
        }
        client = self._client = ConsumerClient(settings, wakeable=True)
        client.subscribe([self.topic], self._assigned, self._revoked, self._revoked)
        self._thread = threading.Thread(target=self._run, name="connect-membership", daemon=True)
        self._thread.start()

    def _assigned(self, partitions: list[tuple[str, int]]) -> None:
        with self._lock:
            self._held.update(partition for _, partition in partitions)
        _log.info("connect worker: slots %s assigned", sorted(p for _, p in partitions))
        self._on_change()

    def _revoked(self, partitions: list[tuple[str, int]]) -> None:
        with self._lock:
            self._held.difference_update(partition for _, partition in partitions)
        _log.info("connect worker: slots %s revoked", sorted(p for _, p in partitions))
        self._on_change()

    def _run(self) -> None:
        client = self._client
        assert client is not None
        while not self._stopping.is_set():
            try:
                client.poll_batch(1.0, 1)  # serves the group's callbacks; the topic stays empty
            except Exception:
                _log.exception("connect worker: the membership poll failed")
                self._stopping.wait(1.0)

    def stop(self) -> None:
        """Leave the group (the others take this worker's slots at once)."""
        self._stopping.set()
        if self._client is not None:
            self._client.wake()
        if self._thread is not None:
            self._thread.join(10)
        if self._client is not None:
            self._client.close()  # leaves the group: revokes every slot
        with self._lock:
            self._held.clear()
