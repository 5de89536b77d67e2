"""``Assignments``: the partitions a listener holds, and the rebalances that change them.

librdkafka calls :meth:`Assignments.on_assign`, :meth:`~Assignments.on_revoke` and
:meth:`~Assignments.on_lost` inside the listener's poll, on its thread. An assigned partition
starts at its committed offset, looked up here (see :mod:`conveyor.processing.positions`),
never at a guess; the metadata committed with it waits for the partition's executor. A
partition revoked while its batch runs is remembered as *retiring*: if it comes straight back
(an eager rebalance), its new executor starts only after that batch (order per partition).
Owned by the listener, as its :class:`~conveyor.processing.commits.Commits` are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.processing.positions import StartAbandoned

if TYPE_CHECKING:
    from conveyor.driver.consumers import ConsumerClient, Partition
    from conveyor.processing.commits import Commits
    from conveyor.processing.listener_actions import FetchedPartition
    from conveyor.processing.listener_reports import Reporter
    from conveyor.processing.partition_core import PartitionCore
    from conveyor.processing.positions import StartPositions

__all__ = ["Assignments"]

_log = logging.getLogger("conveyor.processing")


class AssignmentsListener(Protocol):
    """What the assignments ask of their listener."""

    @property
    def quieted(self) -> bool:
        """Whether the listener takes no new batches (its partitions stay paused)."""

    def drained(self, executor: FetchedPartition) -> None:
        """``executor``'s backlog no longer holds up the listener's polls."""

    def command(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the listener's thread before it hands out fetched messages."""

    def prepare(self, partitions: list[Partition]) -> None:
        """Newly assigned ``partitions``: those with state stores get their executors now
        (their restores begin at once, not at their first message)."""


class Assignments:
    """The partitions a listener holds, and its rebalances (see the module)."""

    def __init__(
        self,
        listener: AssignmentsListener,
        client: ConsumerClient,
        positions: StartPositions,
        executors: dict[Partition, PartitionCore],
        commits: Commits,
        reporter: Reporter,
        *,
        group_id: str,
        incremental: bool,
    ) -> None:
        self._listener = listener
        self._client = client
        self._positions = positions
        self._executors = executors
        self._commits = commits
        self._reporter = reporter
        self._group_id = group_id
        # librdkafka's group protocols: eager (the default) replaces the whole assignment at
        # each rebalance; cooperative-sticky and KIP-848's consumer protocol add and remove.
        self._incremental = incremental
        self.partitions: set[Partition] = set()
        """The partitions assigned now (changed on the listener's thread only)."""
        self.group_metadata: Any = None
        """The group's metadata as of the last assignment (``None``: ask librdkafka)."""
        self._direct: list[Partition] | None = None  # a direct assignment not made yet
        self._retiring: dict[Partition, PartitionCore] = {}
        self._start_metadata: dict[Partition, str] = {}  # committed before the assignment

    def assign_directly(self, partitions: list[Partition]) -> None:
        """Assign ``partitions`` without a group's rebalance, once the listener's thread runs
        (:meth:`start_direct`): a failure there is the listener's crash."""
        self._direct = partitions

    def start_direct(self) -> None:
        """On the listener's thread, before its first poll: make the direct assignment, if
        one waits (the first thread only: a thread that takes the role over finds none)."""
        partitions, self._direct = self._direct, None
        if partitions is not None and self._start(partitions):
            self._assigned_now(partitions)

    def on_assign(self, partitions: list[Partition]) -> None:
        """The group assigned ``partitions``: each starts at its committed offset."""
        if self._start(partitions, incremental=self._incremental):
            self._assigned_now(partitions)

    def on_revoke(self, partitions: list[Partition]) -> None:
        """The group took ``partitions`` away: what was processed until now is committed."""
        self._lose(partitions, commit=True)

    def on_lost(self, partitions: list[Partition]) -> None:
        """``partitions`` were lost (the member left the group): nothing can be committed."""
        self._lose(partitions, commit=False)

    def hand_over(self, executor: PartitionCore) -> None:
        """A new executor of an assigned partition: it gets the metadata committed before the
        assignment, and waits for its revoked predecessor's batch, if one still runs."""
        key = (executor.topic, executor.partition)
        executor.metadata.started_with(self._start_metadata.pop(key, None))
        predecessor = self._retiring.pop(key, None)
        if predecessor is not None:
            executor.follow(predecessor)

    def _start(self, partitions: list[Partition], incremental: bool = False) -> bool:
        """Assign ``partitions`` at their committed offsets (their metadata awaits executors);
        False when the listener stopped first (the loop ends on the stop; ``close()`` may call
        this on the stopping thread): nothing is assigned."""
        try:
            positions, metadata = self._positions.resolve(partitions, self._group_id)
        except StartAbandoned as stopped:
            _log.info("listener %s: %s", self._reporter.name, stopped)
            return False
        for key in partitions:
            self._start_metadata.pop(key, None)
        self._start_metadata.update(metadata)
        self._client.assign(positions, incremental=incremental)
        return True

    def _assigned_now(self, partitions: list[Partition]) -> None:
        self.partitions.update(partitions)
        try:  # a new generation: transactions commit offsets with its metadata
            self.group_metadata = self._client.group_metadata()
        except Exception:  # a direct assignment has no group: asked when needed
            self.group_metadata = None
        self._reporter.partitions_assigned(partitions)
        self._listener.prepare(partitions)
        if self._listener.quieted and partitions:
            client = self._client
            self._listener.command(lambda: client.pause(partitions))

    def _lose(self, partitions: list[Partition], commit: bool) -> None:
        self.partitions.difference_update(partitions)
        executors = self._executors
        if commit:  # what was processed until now, the store writes kept for a flush with it
            # (a transaction committed now, in the revocation, is still the generation's: its
            # offsets carry the metadata cached at the assignment)
            for partition in partitions:
                if partition in executors:
                    executors[partition].flush_idle()
            self._commits.marked(executors, sync=True, only=set(partitions))
        self.group_metadata = None  # the generation moves on
        lost = [executors.pop(partition) for partition in partitions if partition in executors]
        for executor in lost:
            if executor.scheduled:  # revoked mid-batch; may come back at once (eager rebalance)
                self._retiring[(executor.topic, executor.partition)] = executor
            executor.revoke()  # later marks of these partitions are refused
            self._listener.drained(executor)
            self._commits.forget((executor.topic, executor.partition))
        self._reporter.partitions_revoked(partitions)
