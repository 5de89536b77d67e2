"""A listener's assignments without a broker: partitions start at the offsets asked for and
their committed metadata waits for their executors, a revocation commits what was processed
(a loss cannot), a quiet listener's new partitions stay paused, a direct assignment is made
once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from conveyor import Consumer, Monitor
from conveyor.instrumentation import events as ev
from conveyor.processing.assignments import Assignments
from conveyor.processing.commits import Commits
from conveyor.processing.listener_reports import Reporter
from conveyor.processing.partition_core import PartitionCore
from unit.processing.fakes import rig

Partition = tuple[str, int]


class Quiet(Consumer):
    def consume(self) -> None:
        return None


class FakeClient:
    """Records assignments, commits and pauses; the group's metadata is a string."""

    def __init__(self) -> None:
        self.assigned: list[tuple[list[tuple[str, int, int]], bool]] = []
        self.commits: list[tuple[list[tuple[str, int, int]], bool]] = []
        self.paused: list[list[Partition]] = []

    def assign(self, partitions: Iterable[tuple[str, int, int]], incremental: bool = False) -> None:
        self.assigned.append((list(partitions), incremental))

    def group_metadata(self) -> Any:
        return "generation-1"

    def pause(self, partitions: Iterable[Partition]) -> None:
        self.paused.append(list(partitions))

    def commit(
        self,
        offsets: Iterable[tuple[str, int, int]],
        asynchronous: bool = False,
        metadata: Mapping[Partition, str] | None = None,
    ) -> bool:
        self.commits.append((list(offsets), asynchronous))
        return True


class FakePositions:
    """Every partition starts at offset 7, with the metadata given per partition."""

    def __init__(self, metadata: dict[Partition, str] | None = None) -> None:
        self.metadata = metadata or {}

    def resolve(
        self, partitions: list[Partition], group_id: str
    ) -> tuple[list[tuple[str, int, int]], dict[Partition, str]]:
        found = {key: self.metadata[key] for key in partitions if key in self.metadata}
        return [(topic, partition, 7) for topic, partition in partitions], found


class FakeListener:
    """The listener as its assignments see it: commands run when the test says."""

    def __init__(self) -> None:
        self.quieted = False
        self.commands: list[Callable[[], None]] = []
        self.drained_ones: list[Any] = []
        self.prepared: list[Partition] = []

    def drained(self, executor: Any) -> None:
        self.drained_ones.append(executor)

    def command(self, action: Callable[[], None]) -> None:
        self.commands.append(action)

    def prepare(self, partitions: list[Partition]) -> None:
        self.prepared.extend(partitions)


def assignments(
    executors: dict[Partition, PartitionCore] | None = None,
    positions: FakePositions | None = None,
    incremental: bool = False,
) -> tuple[Assignments, FakeClient, FakeListener, Monitor]:
    r = rig(Quiet)
    client, listener = FakeClient(), FakeListener()
    executors = executors if executors is not None else {}
    reporter = Reporter("unit", "group", r.executor.context, executors, threading.Event())
    built = Assignments(
        listener,
        client,  # type: ignore[arg-type]
        positions or FakePositions(),  # type: ignore[arg-type]
        executors,
        Commits(client, reporter.committed),
        reporter,
        group_id="group",
        incremental=incremental,
    )
    return built, client, listener, r.executor.context.monitor


def test_assigned_partitions_start_where_asked_and_their_metadata_waits_for_the_executor() -> None:
    built, client, _, monitor = assignments(
        positions=FakePositions({("orders", 1): "cursor=6"}), incremental=True
    )
    events: list[Any] = []
    monitor.subscribe(ev.REBALANCE_PARTITIONS_ASSIGNED, events.append)
    built.on_assign([("orders", 0), ("orders", 1)])
    assert client.assigned == [([("orders", 0, 7), ("orders", 1, 7)], True)]
    assert built.partitions == {("orders", 0), ("orders", 1)}
    assert built.group_metadata == "generation-1"
    assert [event["partitions"] for event in events] == [[("orders", 0), ("orders", 1)]]
    executor = rig(Quiet, partition=1).executor
    built.hand_over(executor)
    assert executor.offset_metadata == "cursor=6"


def test_a_revocation_commits_what_was_processed_of_those_partitions_and_a_loss_does_not() -> None:
    kept, revoked, lost = (rig(Quiet, partition=p).executor for p in range(3))
    executors: dict[Partition, PartitionCore] = {
        ("orders", 0): kept,
        ("orders", 1): revoked,
        ("orders", 2): lost,
    }
    built, client, listener, _ = assignments(executors)
    built.on_assign([("orders", 0), ("orders", 1), ("orders", 2)])
    for executor in (kept, revoked, lost):
        executor.mark(5, sync=False)
    built.on_revoke([("orders", 1)])
    assert client.commits == [([("orders", 1, 5)], False)], "synchronous, of that one only"
    built.on_lost([("orders", 2)])
    assert len(client.commits) == 1, "a lost partition commits nothing"
    assert [executor.revoked for executor in (kept, revoked, lost)] == [False, True, True]
    assert executors == {("orders", 0): kept}
    assert listener.drained_ones == [revoked, lost], "their backlog holds up no poll"
    assert built.partitions == {("orders", 0)}
    assert built.group_metadata is None, "the generation moved on"


def test_a_revoked_partition_flushes_its_kept_store_writes_before_its_commit() -> None:
    """The writes an idle partition kept for its next flush go out first: the commit at the
    revocation carries their offset (its next owner does not run those batches again). A lost
    partition commits nothing, and flushes nothing for it."""
    revoked, lost = (rig(Quiet, partition=p).executor for p in range(2))
    flushed: list[int] = []

    def flush_idle(executor: PartitionCore) -> None:  # kept writes flushed: offset marked
        flushed.append(executor.partition)
        executor.mark(9, sync=False)

    for executor in (revoked, lost):
        executor.flush_idle = lambda e=executor: flush_idle(e)  # type: ignore[method-assign]
    built, client, _, _ = assignments({("orders", 0): revoked, ("orders", 1): lost})
    built.on_assign([("orders", 0), ("orders", 1)])
    for executor in (revoked, lost):
        executor.mark(5, sync=False)
    built.on_lost([("orders", 1)])
    built.on_revoke([("orders", 0)])
    assert flushed == [0]
    assert client.commits == [([("orders", 0, 9)], False)]


def test_a_quiet_listeners_new_partitions_stay_paused() -> None:
    built, client, listener, _ = assignments()
    listener.quieted = True
    built.on_assign([("orders", 0)])
    assert client.paused == [], "paused by a command, after the poll"
    [pause] = listener.commands
    pause()
    assert client.paused == [[("orders", 0)]]


def test_a_direct_assignment_is_made_once_by_the_listeners_first_thread() -> None:
    built, client, _, _ = assignments()
    built.assign_directly([("orders", 0), ("orders", 1)])
    assert client.assigned == [], "not before the listener's thread runs"
    built.start_direct()
    built.start_direct()  # a thread that took the role over finds none to make
    assert client.assigned == [([("orders", 0, 7), ("orders", 1, 7)], False)]
    assert built.partitions == {("orders", 0), ("orders", 1)}
