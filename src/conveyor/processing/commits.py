"""``Commits``: a listener's commits of what its executors marked, each offset with the
metadata it carries (see :mod:`~conveyor.processing.offset_metadata`), when the next one is
due, and what it committed last per partition. Used on the listener's thread only."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from conveyor.driver.consumers import Partition
    from conveyor.processing.partition_core import PartitionCore

__all__ = ["Commits"]

Report = Callable[[list[tuple[str, int, int]], bool, float], None]
"""Told of each commit done: its ``(topic, partition, next offset)``s, whether it was
synchronous, and when it started (``time.perf_counter()``)."""


class _Committing(Protocol):
    def commit(
        self,
        offsets: Iterable[tuple[str, int, int]],
        asynchronous: bool = False,
        metadata: Mapping[Partition, str] | None = None,
    ) -> bool: ...


class Commits:
    """What a listener committed, and its commits (see the module): what was marked is
    committed every ``interval`` seconds (``auto.commit.interval.ms``), and when asked."""

    def __init__(self, client: _Committing, report: Report, interval: float = 5.0) -> None:
        self._client = client
        self._report = report
        self._interval = interval
        self.due = time.monotonic() + interval
        """When the next commit of what was marked is due (``time.monotonic()``)."""
        self.offsets: dict[Partition, int] = {}
        """The offsets committed last, per partition."""
        self._metadata: dict[Partition, str | None] = {}  # the metadata committed with them

    def marked(
        self,
        executors: Mapping[Partition, PartitionCore],
        sync: bool,
        only: set[Partition] | None = None,
    ) -> bool:
        """Commit what ``executors`` marked since the last commit (``only`` these partitions,
        when given): an offset, or metadata, not committed yet; the next is due an interval
        from now. False when refused."""
        self.due = time.monotonic() + self._interval
        offsets = []
        metadata: dict[Partition, str] = {}
        for key, executor in executors.items():
            marked = executor.committable()
            if marked is None or (only is not None and key not in only):
                continue
            carried = executor.metadata.at(marked)
            if self.offsets.get(key) != marked or self._metadata.get(key) != carried:
                offsets.append((key[0], key[1], marked))
                if carried is not None:
                    metadata[key] = carried
        if not offsets:
            return True
        started = time.perf_counter()
        done = self._client.commit(offsets, asynchronous=not sync, metadata=metadata)
        if done:
            for topic, partition, offset in offsets:
                self.offsets[(topic, partition)] = offset
                self._metadata[(topic, partition)] = metadata.get((topic, partition))
            self._report(offsets, sync, started)
        return done

    def now(self, topic: str, partition: int, next_offset: int, metadata: str | None) -> bool:
        """Commit ``next_offset`` with ``metadata`` and wait; False when refused."""
        started = time.perf_counter()
        offsets = [(topic, partition, next_offset)]
        carried = None if metadata is None else {(topic, partition): metadata}
        done = self._client.commit(offsets, metadata=carried)
        if done:  # the next commit of what is marked need not send it again
            self.offsets[(topic, partition)] = next_offset
            self._metadata[(topic, partition)] = metadata
            self._report(offsets, True, started)
        return done

    def refused(self, offsets: Iterable[tuple[str, int, int]]) -> None:
        """The group refused a commit of ``offsets``: those recorded as committed (an
        asynchronous commit is recorded as it is sent) are not, and the next commit of what is
        marked sends them again."""
        for topic, partition, offset in offsets:
            if self.offsets.get((topic, partition)) == offset:
                self.offsets.pop((topic, partition), None)
                self._metadata.pop((topic, partition), None)

    def forget(self, key: Partition) -> None:
        """The partition left this listener."""
        self.offsets.pop(key, None)
        self._metadata.pop(key, None)
