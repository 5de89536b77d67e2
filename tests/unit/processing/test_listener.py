"""The listener's own logic, without a broker: one poll split into per-partition runs in
order, fetch errors reported (never dropped), revocation mid-batch handing over in order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError as RdKafkaError

from conveyor import Consumer, Monitor
from conveyor.processing.context import ProcessingContext
from conveyor.processing.listener import Listener
from conveyor.processing.timers import Timers
from unit.processing.fakes import ErrorRaw, FakeRaw, route, settings


class Recording(Consumer):
    seen: list[tuple[int, list[int]]]
    eofs: list[int]

    def consume(self) -> None:
        type(self).seen.append((self.partition, [m.offset for m in self.messages]))

    def eofed(self) -> None:
        type(self).eofs.append(self.partition)


@pytest.fixture
def listener() -> Iterator[tuple[Listener, list[Any], Monitor, type[Recording]]]:
    consumer = type("Orders", (Recording,), {"seen": [], "eofs": []})
    jobs: list[Any] = []
    monitor = Monitor()
    context = ProcessingContext(
        settings=settings(),
        monitor=monitor,
        producer=lambda: None,  # type: ignore[arg-type, return-value]
        transactional_producer=lambda: None,  # type: ignore[arg-type, return-value]
        on_crash=lambda error, where: None,
    )
    timers = Timers("unit")
    built = Listener(context, "unit", "group", [route(consumer)], jobs.append, timers)
    try:
        yield built, jobs, monitor, consumer
    finally:
        built.close()
        timers.stop()


def run(jobs: list[Any]) -> None:
    while jobs:
        jobs.pop(0)()


def test_a_poll_is_split_into_runs_per_partition_in_order(listener: Any) -> None:
    built, jobs, _, consumer = listener
    poll = [FakeRaw(0, partition=0), FakeRaw(0, partition=1), FakeRaw(1, partition=1),
            FakeRaw(1, partition=0), FakeRaw(2, partition=0)]  # fmt: skip
    built._distribute(poll)
    run(jobs)
    assert sorted(consumer.seen) == [(0, [0, 1, 2]), (1, [0, 1])]
    assert set(built.executors) == {("orders", 0), ("orders", 1)}


def test_end_of_partition_reaches_eofed(listener: Any) -> None:
    built, jobs, _, consumer = listener
    built._distribute([FakeRaw(0, partition=2), ErrorRaw(RdKafkaError._PARTITION_EOF, 2)])
    run(jobs)
    assert consumer.seen == [(2, [0])]
    assert consumer.eofs == [2]


def test_other_fetch_errors_are_reported_not_dropped(listener: Any) -> None:
    built, jobs, monitor, consumer = listener
    errors: list[Any] = []
    monitor.subscribe("error.occurred", errors.append)
    built._distribute(
        [FakeRaw(0), ErrorRaw(RdKafkaError._AUTO_OFFSET_RESET, partition=3), FakeRaw(1)]
    )
    run(jobs)
    assert consumer.seen == [(0, [0, 1])]
    [event] = errors
    assert event["type"] == "consumer.fetch.error"
    assert (event["topic"], event["partition"]) == ("orders", 3)
    assert event["error"].name == "_AUTO_OFFSET_RESET"


def test_a_poll_interval_exceeded_is_told_as_itself_with_the_batch_that_held_the_thread(
    listener: Any,
) -> None:
    """librdkafka's MAXPOLL came as "fetch error on None/0"; it is a batch that ran too long."""
    built, jobs, monitor, _ = listener
    release, started = threading.Event(), threading.Event()

    class Stuck(Consumer):
        def consume(self) -> None:
            started.set()
            release.wait(10)

    built.routes["orders"] = route(Stuck)
    errors: list[Any] = []
    monitor.subscribe("error.occurred", errors.append)
    built._distribute([FakeRaw(0, partition=4)])
    worker = threading.Thread(target=run, args=(jobs,))
    worker.start()
    try:
        assert started.wait(10)
        built._distribute([ErrorRaw(RdKafkaError._MAX_POLL_EXCEEDED, partition=0)])
    finally:
        release.set()
        worker.join(10)
    [event] = errors
    assert event["type"] == "consumer.poll_interval.exceeded"
    assert (event["topic"], event["partition"]) == ("orders", 4)
    assert "max.poll.interval.ms" in str(event["error"])
    assert "orders/4 had run a batch for" in str(event["error"])


def test_a_partition_revoked_mid_batch_hands_over_in_order(listener: Any) -> None:
    """Lost while its batch runs and assigned straight back: the new executor follows the old."""
    built, jobs, _, _ = listener
    release = threading.Event()
    started = threading.Event()
    order: list[int] = []

    class Slow(Consumer):
        def consume(self) -> None:
            first = self.messages.first.offset
            if first == 0:
                started.set()
                release.wait(10)
            order.append(first)

    built.routes["orders"] = route(Slow)
    built._distribute([FakeRaw(0)])
    worker = threading.Thread(target=run, args=(jobs,))
    worker.start()
    assert started.wait(10)
    old = built.executors[("orders", 0)]
    built.assignments.on_lost([("orders", 0)])
    assert old.revoked
    built._distribute([FakeRaw(1)])
    new = built.executors[("orders", 0)]
    assert new is not old
    assert new.held, "the new owner waits for the old batch"
    release.set()
    worker.join(10)
    run(jobs)
    assert order == [0, 1]


def test_quiet_holds_every_partition(listener: Any) -> None:
    built, jobs, _, consumer = listener
    built._distribute([FakeRaw(0)])
    run(jobs)
    built.quiet()
    built._distribute([FakeRaw(1)])
    assert jobs == []
    assert consumer.seen == [(0, [0])]


def test_an_assignment_after_the_stop_is_left_without_asking_for_offsets(listener: Any) -> None:
    """``close()`` runs the rebalance callbacks still queued on the stopping thread: an
    assignment there neither raises into the shutdown nor asks the broker for offsets."""
    built, _, _, _ = listener
    built.stop()
    built.assignments.on_assign([("orders", 0)])  # returns: nothing is assigned, nothing raised
    assert built.assigned() == set()
