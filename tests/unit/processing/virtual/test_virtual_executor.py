"""A partition with virtual partitions, on a fake listener that runs jobs in the test's thread:
lanes by key, order per key, commits that never pass an unfinished message, collapse after a
failure, dead letters per message, and the bound on what is handed out."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

import conveyor.processing.virtual.executor as virtual_executor
import conveyor.processing.virtual.linger as virtual_linger
from conveyor import Consumer
from conveyor.instrumentation import events as ev
from conveyor.processing.virtual import VirtualPartitionExecutor
from unit.processing.fakes import FakeRaw, Rig, rig

if TYPE_CHECKING:
    from unit.conftest import YoungClock


class Recording(Consumer):
    """Records (lane, offset, key, collapsed) per message; raises where told (once per offset,
    or always for ``poison``)."""

    seen: list[tuple[int | None, int, bytes | None, bool]]
    fail_once: set[int]
    poison: set[int]
    mark_each: bool = False

    def consume(self) -> None:
        cls = type(self)
        for message in self.messages:
            if message.offset in cls.poison:
                raise RuntimeError(f"poison {message.offset}")
            if message.offset in cls.fail_once:
                cls.fail_once.discard(message.offset)
                raise RuntimeError(f"bad {message.offset}")
            cls.seen.append((self.virtual_partition, message.offset, message.key, self.collapsed))
            if cls.mark_each:
                self.mark_as_consumed(message)


def recording(**attributes: Any) -> type[Recording]:
    fields = {"seen": [], "fail_once": set(), "poison": set(), **attributes}
    return type("Orders", (Recording,), fields)


def keyed(offsets: range, keys: int = 10) -> list[Any]:
    return [FakeRaw(offset, key=f"key-{offset % keys}".encode()) for offset in offsets]


def lanes_rig(consumer: type[Consumer], lanes: int = 4, **options: Any) -> Rig:
    settings = options.pop("virtual_partitions", {})
    r = rig(consumer, virtual_partitions={"max_partitions": lanes, **settings}, **options)
    assert isinstance(r.executor, VirtualPartitionExecutor)
    return r


def executor(r: Rig) -> VirtualPartitionExecutor:
    assert isinstance(r.executor, VirtualPartitionExecutor)
    return r.executor


def per_key(seen: list[tuple[int | None, int, bytes | None, bool]]) -> dict[Any, list[int]]:
    keys: dict[Any, list[int]] = {}
    for _, offset, key, _ in seen:
        keys.setdefault(key, []).append(offset)
    return keys


def test_lanes_keep_order_per_key_and_run_everything_once() -> None:
    consumer = recording()
    r = lanes_rig(consumer, lanes=4, max_messages=7)
    r.executor.add(keyed(range(200)), high_watermark=200)
    assert len(r.listener.jobs) == 4, "one job per lane with work"
    r.listener.run_jobs()
    offsets = sorted(offset for _, offset, _, _ in consumer.seen)
    assert offsets == list(range(200)), "each message once"
    for key, seen in per_key(consumer.seen).items():
        assert seen == sorted(seen), f"{key!r} out of order"
    lanes_of_key: dict[Any, set[int | None]] = {}
    for lane, _, key, _ in consumer.seen:
        lanes_of_key.setdefault(key, set()).add(lane)
    assert all(len(lanes) == 1 for lanes in lanes_of_key.values()), "a key stays in its lane"
    assert r.executor.marked == 200


def test_the_marked_offset_never_passes_an_unfinished_lane() -> None:
    consumer = recording()
    r = lanes_rig(consumer, lanes=2)
    batch = [FakeRaw(offset, key=b"a" if offset < 3 else b"same") for offset in range(10)]
    lane_a = executor(r).assigner.lane_of(batch[0])
    assert lane_a != executor(r).assigner.lane_of(batch[5]), "the keys must take two lanes"
    r.executor.add(batch, high_watermark=10)
    jobs = r.listener.jobs
    slow = jobs.pop(0 if lane_a == 0 else 1)  # lane of "a" (offsets 0-2) waits
    r.listener.run_jobs()
    assert {offset for _, offset, _, _ in consumer.seen} == set(range(3, 10))
    assert r.executor.committable() == 0, "3-9 finished, 0 did not: commit nothing past 0"
    slow()
    assert r.executor.marked == 10


def test_mark_as_consumed_marks_the_message_and_its_lane_before_it() -> None:
    marked_in_lane: list[int | None] = []

    class Marking(Consumer):
        def consume(self) -> None:
            self.mark_as_consumed(self.messages[-1])
            marked_in_lane.append(self._executor.executor.marked)  # type: ignore[attr-defined]

    r = lanes_rig(Marking, lanes=2, manual_offset_management=True)
    batch = [FakeRaw(0, key=b"a"), FakeRaw(1, key=b"same"), FakeRaw(2, key=b"a")]
    lane_a = executor(r).assigner.lane_of(batch[0])
    assert lane_a != executor(r).assigner.lane_of(batch[1])
    r.executor.add(batch, high_watermark=3)
    r.listener.jobs.pop(0 if lane_a == 0 else 1)()  # lane "a" marks 2 (and 0): 1 is not done
    assert marked_in_lane == [1]
    r.listener.run_jobs()
    assert r.executor.marked == 3


def test_a_failing_lane_collapses_the_partition_until_past_the_failure() -> None:
    consumer = recording(fail_once={13}, mark_each=True)
    r = lanes_rig(consumer, lanes=4, max_messages=5)
    events: list[tuple[str, dict[str, Any]]] = []
    for name in (ev.VIRTUAL_PARTITIONS_COLLAPSED, ev.VIRTUAL_PARTITIONS_RESTORED):
        r.monitor.subscribe(name, lambda event, name=name: events.append((name, dict(event))))
    r.executor.add(keyed(range(40), keys=8), high_watermark=40)
    r.listener.run_jobs()
    assert r.timers.delays() == [1.0], "the collapsed run waits out the back-off"
    assert [name for name, _ in events] == [ev.VIRTUAL_PARTITIONS_COLLAPSED]
    before = {offset for _, offset, _, _ in consumer.seen}
    assert 13 not in before
    assert r.executor.marked is not None
    assert r.executor.marked <= 13, "nothing at or past the failed message is marked"
    r.timers.fire()
    r.listener.run_jobs()
    collapsed = [(offset, lane) for lane, offset, _, flag in consumer.seen if flag]
    assert collapsed, "the retry ran collapsed"
    assert [offset for offset, _ in collapsed] == sorted(o for o, _ in collapsed), "in strict order"
    assert {lane for _, lane in collapsed} == {0}
    assert not before & {offset for offset, _ in collapsed}, "finished messages are not run twice"
    assert sorted(offset for _, offset, _, _ in consumer.seen) == list(range(40))
    assert [name for name, _ in events][-1] == ev.VIRTUAL_PARTITIONS_RESTORED
    assert r.executor.marked == 40
    r.executor.add(keyed(range(40, 60), keys=8), high_watermark=60)
    r.listener.run_jobs()
    assert not any(flag for _, offset, _, flag in consumer.seen if offset >= 40), "lanes again"
    for key, seen in per_key(consumer.seen).items():
        assert seen == sorted(seen), f"{key!r} out of order"


def test_retry_finished_lanes_runs_them_again() -> None:
    consumer = recording(fail_once={13}, mark_each=True)
    r = lanes_rig(
        consumer, lanes=4, max_messages=5, virtual_partitions={"retry_finished_lanes": True}
    )
    r.executor.add(keyed(range(40), keys=8), high_watermark=40)
    r.listener.run_jobs()
    before = [offset for _, offset, _, _ in consumer.seen]
    r.timers.fire()
    r.listener.run_jobs()
    again = [offset for _, offset, _, flag in consumer.seen if flag]
    unfinished_start = min(set(range(40)) - set(before))
    assert again == list(range(unfinished_start, 40)), (
        "everything from the first unfinished, in order"
    )


@pytest.mark.parametrize("dispatch_method", ["produce_sync", "produce_async"])
def test_a_poison_message_goes_to_the_dead_letter_queue_and_the_rest_goes_on(
    dispatch_method: str,
) -> None:
    consumer = recording(poison={21}, mark_each=True)
    r = lanes_rig(
        consumer,
        lanes=4,
        max_messages=5,
        dead_letter_queue={
            "topic": "orders-dlq",
            "max_retries": 1,
            "dispatch_method": dispatch_method,
        },
    )
    r.executor.add(keyed(range(40), keys=8), high_watermark=40)
    for _ in range(5):
        r.listener.run_jobs()
        r.timers.fire()
    r.listener.run_jobs()
    dead = [message for method, message in r.producer.calls if method == dispatch_method]
    assert [dict(m["headers"])["original_offset"] for m in dead] == ["21"]
    assert sorted(offset for _, offset, _, _ in consumer.seen) == [o for o in range(40) if o != 21]
    assert r.executor.marked == 40
    if dispatch_method == "produce_async":
        assert r.executor.committable() == 21, "not past the copy before it is acknowledged"
        r.producer.handles[0].deliver()
    assert r.executor.committable() == 40


def test_a_partitioner_that_raises_collapses_instead_of_losing_the_message() -> None:
    consumer = recording()

    def partitioner(message: Any) -> Any:
        if message.offset == 5:
            raise ValueError("no key")
        return message.key

    r = lanes_rig(consumer, lanes=4, virtual_partitions={"partitioner": partitioner})
    errors: list[dict[str, Any]] = []
    r.monitor.subscribe(ev.ERROR_OCCURRED, lambda event: errors.append(dict(event)))
    r.executor.add(keyed(range(10)), high_watermark=10)
    r.listener.run_jobs()
    r.timers.fire()
    r.listener.run_jobs()
    assert sorted(offset for _, offset, _, _ in consumer.seen) == list(range(10))
    assert [e["type"] for e in errors] == ["consumer.virtual_partitions.partitioner.error"]
    assert r.executor.marked == 10


def test_what_is_handed_out_is_bounded_by_the_high_water_mark() -> None:
    consumer = recording()
    r = lanes_rig(consumer, lanes=2, max_messages=10)
    high_water = r.executor._high_water
    r.executor.add([FakeRaw(o, key=b"same") for o in range(high_water * 3)], high_watermark=None)
    vp = executor(r)
    assert len(vp.tracker) == high_water
    assert len(r.executor.pending) == high_water * 2
    assert r.listener.over, "the listener is told to hold back"
    r.listener.run_jobs()
    assert r.executor.marked == high_water * 3
    assert not r.listener.over


def test_lanes_that_drained_the_backlog_before_the_listener_throttles_leave_it_unpaused() -> None:
    """The 64-lane broadcast's stall: the lanes took the backlog below its low-water mark
    before the listener got to throttle the partition, which then stayed paused with nothing
    pending (no later hand-out resumes it)."""
    r = lanes_rig(recording(), lanes=4, max_messages=10)
    high_water = r.executor._high_water
    r.executor.add(keyed(range(high_water * 3)), high_watermark=None)
    assert r.listener.over
    r.listener.run_jobs()
    assert not r.executor.pending
    assert r.executor.throttle() is False
    assert not r.executor.backpressure


def test_the_distribution_is_on_the_monitor_and_in_the_lane_states() -> None:
    consumer = recording()
    r = lanes_rig(consumer, lanes=4)
    sizes: list[list[int]] = []
    r.monitor.subscribe(
        ev.VIRTUAL_PARTITIONS_DISTRIBUTED, lambda event: sizes.append(event["sizes"])
    )
    batch = keyed(range(100), keys=20)
    r.executor.add(batch, high_watermark=100)
    expected = [0] * 4
    for raw in batch:
        expected[executor(r).assigner.lane_of(raw)] += 1
    assert sizes == [expected]
    states = r.executor.lane_states()
    assert [s.handed_out for s in states] == expected
    assert [s.queued for s in states] == expected
    r.listener.run_jobs()
    assert [s.queued for s in r.executor.lane_states()] == [0] * 4


def test_hooks_run_on_every_lane_consumer() -> None:
    revoked: list[int | None] = []

    class Hooked(Consumer):
        def consume(self) -> None:
            pass

        def revoked(self) -> None:
            revoked.append(self.virtual_partition)

    r = lanes_rig(Hooked, lanes=3)
    r.executor.add(keyed(range(30), keys=30), high_watermark=30)
    r.listener.run_jobs()
    r.executor.revoke()
    r.listener.run_jobs()
    assert sorted(revoked) == [0, 1, 2]


def test_a_revoked_partition_releases_its_successor_only_after_every_lane() -> None:
    consumer = recording()
    r = lanes_rig(consumer, lanes=2)
    batch = [FakeRaw(0, key=b"a"), FakeRaw(1, key=b"same")]
    r.executor.add(batch, high_watermark=2)
    first = r.listener.jobs.pop(0)
    second = r.listener.jobs.pop(0)
    r.executor.revoke()
    successor = lanes_rig(consumer, lanes=2, listener=r.listener).executor
    successor.follow(r.executor)
    successor.add([FakeRaw(2, key=b"a")], high_watermark=3)
    assert not r.listener.jobs, "the successor waits"
    first()
    assert not r.listener.jobs, "one lane still runs"
    second()
    assert r.listener.jobs, "released once both lanes ended"


def test_async_lanes_are_coroutines_for_the_event_loop() -> None:
    seen: list[tuple[int | None, int]] = []

    class AsyncOrders(Consumer):
        async def consume(self) -> None:
            seen.extend((self.virtual_partition, m.offset) for m in self.messages)

    r = lanes_rig(AsyncOrders, lanes=3)
    r.executor.add(keyed(range(30), keys=30), high_watermark=30)
    assert len(r.listener.jobs) == 3
    r.listener.run_jobs()
    assert sorted(offset for _, offset in seen) == list(range(30))
    assert {lane for lane, _ in seen} == {0, 1, 2}
    assert r.executor.marked == 30


def test_pause_in_a_lane_holds_the_partition_and_seeks_to_the_first_unfinished() -> None:
    class Pausing(Consumer):
        def consume(self) -> None:
            if any(message.offset == 4 for message in self.messages):
                self.pause()

    r = lanes_rig(Pausing, lanes=2)
    batch = [FakeRaw(offset, key=b"a" if offset % 2 else b"same") for offset in range(10)]
    r.executor.add(batch, high_watermark=10)
    r.listener.run_jobs()
    assert ("pause", "orders", 0) in r.listener.actions
    [seek] = [action for action in r.listener.actions if action[0] == "seek"]
    assert seek[3] <= 4, "resumes at or before the batch that paused"
    committable = r.executor.committable()
    assert committable is None or committable <= 4, "the paused batch is not marked"
    assert all(not lane.queue for lane in executor(r).lanes)


def test_linger_waits_for_a_full_batch_or_the_interval() -> None:
    consumer = recording()
    r = lanes_rig(consumer, lanes=1, max_messages=4, virtual_partitions={"linger": 0.02})
    r.executor.add(keyed(range(3)), high_watermark=3)
    assert not r.listener.jobs, "3 of 4: the lane waits"
    assert r.timers.delays() == [pytest.approx(0.02, abs=0.01)]
    r.executor.add(keyed(range(3, 9)), high_watermark=9)
    assert len(r.listener.jobs) == 1, "a full batch runs at once"
    r.listener.run_jobs()
    assert [offset for _, offset, _, _ in consumer.seen] == list(range(8)), "two full batches"
    assert r.executor.marked == 8
    time.sleep(0.03)
    r.timers.fire()
    r.listener.run_jobs()
    assert [offset for _, offset, _, _ in consumer.seen] == list(range(9)), "the rest, when due"


def test_a_collapse_into_a_lane_that_never_ran_does_not_linger_on_a_young_clock(
    young_clock: YoungClock,
) -> None:
    """Lane 0 never had a message: what a collapse queues there runs once the back-off is
    over, not when the machine has been up for ``linger``."""
    young_clock.seen_by(virtual_executor, virtual_linger)
    consumer = recording(fail_once={1}, mark_each=True)
    r = lanes_rig(consumer, lanes=2, max_messages=2, virtual_partitions={"linger": 60.0})
    r.executor.add([FakeRaw(0, key=b"a"), FakeRaw(1, key=b"a")], high_watermark=2)  # lane 1
    r.listener.run_jobs()  # 0 runs, 1 fails: the partition collapses, 1 alone in lane 0
    assert r.timers.delays() == [1.0], "the collapsed run waits out the back-off"
    r.timers.fire()
    r.listener.run_jobs()
    assert [(lane, offset) for lane, offset, _, _ in consumer.seen] == [(1, 0), (0, 1)]


def test_a_partitioner_error_on_the_last_message_still_runs_it() -> None:
    """Nothing runs and nothing more arrives: the message the partitioner failed on runs."""
    consumer = recording()

    def partitioner(message: Any) -> Any:
        if message.offset == 5:
            raise ValueError("bad key")
        return message.key

    r = lanes_rig(consumer, virtual_partitions={"partitioner": partitioner})
    r.executor.add(keyed(range(5)), high_watermark=5)
    r.listener.run_jobs()
    r.executor.add(keyed(range(5, 6)), high_watermark=6)
    r.listener.run_jobs()
    assert sorted(offset for _, offset, _, _ in consumer.seen) == list(range(6))
    assert r.executor.marked == 6


def test_revoked_during_a_tick_the_successor_still_starts() -> None:
    class Ticking(Recording):
        def tick(self) -> None:
            pass

    consumer = recording()
    ticking = type(
        "Ticking", (Ticking,), {"seen": consumer.seen, "fail_once": set(), "poison": set()}
    )
    r = lanes_rig(ticking)
    r.executor.add(keyed(range(1)), high_watermark=1)
    r.listener.run_jobs()
    r.executor.tick()
    assert r.executor.scheduled
    r.executor.revoke()
    successor = lanes_rig(ticking, listener=r.listener).executor
    successor.follow(r.executor)
    r.listener.run_jobs()
    successor.add(keyed(range(1, 2)), high_watermark=2)
    r.listener.run_jobs()
    assert [offset for _, offset, _, _ in consumer.seen] == [0, 1]


@pytest.mark.parametrize("hook", ["reached_end", "eofed"])
def test_the_end_of_the_partition_reaches_each_lanes_end_hook_by_either_name(hook: str) -> None:
    """Once every lane is done, each lane's consumer hears that the end was reached: through
    reached_end(), or eofed() (Karafka's name, kept as an alias) when that is the override."""
    ends: list[int | None] = []
    consumer = recording()
    ending = type("Ending", (consumer,), {hook: lambda self: ends.append(self.virtual_partition)})
    r = lanes_rig(ending, lanes=2)
    r.executor.add(keyed(range(20)), high_watermark=20)
    r.executor.reached_eof()
    r.listener.run_jobs()
    assert len(consumer.seen) == 20
    lanes = sorted({lane for lane, *_ in consumer.seen})
    assert sorted(ends) == lanes == [0, 1], "once per lane's consumer"


def test_the_end_is_not_reached_while_a_lane_holds_messages_that_wait() -> None:
    """A lane whose batch failed keeps it in its queue for the retry: the end of the
    partition is reached once that retry ran, not when the lanes stopped meanwhile."""
    ends: list[str] = []
    consumer = recording(fail_once={3})
    ending = type("Ending", (consumer,), {"reached_end": lambda self: ends.append("end")})
    r = lanes_rig(ending, lanes=2)
    r.executor.add(keyed(range(10)), high_watermark=10)
    r.executor.reached_eof()
    r.listener.run_jobs()
    assert ends == [], "offset 3 waits for its retry"
    for _ in range(5):  # the back-off's timer, then what it started
        r.timers.fire()
        r.listener.run_jobs()
    assert {offset for _, offset, _, _ in consumer.seen} == set(range(10))
    assert ends, "the end once everything ran"


def test_retry_finished_lanes_keeps_each_keys_order_when_the_lanes_come_back() -> None:
    """Lane 0 still holds a re-run of a message of key b when the committable offset passes
    the collapse: b's next message must not run in its own lane before that re-run."""
    consumer = recording(fail_once={0})
    r = lanes_rig(
        consumer, lanes=2, max_messages=1, virtual_partitions={"retry_finished_lanes": True}
    )
    vp = executor(r)
    a, b = b"same", b"a"  # lanes 0 and 1 of 2
    vp.add([FakeRaw(0, key=a), FakeRaw(1, key=b)], high_watermark=2)
    r.listener.jobs.reverse()  # lane 1 (b at 1) finishes before lane 0 fails at 0
    r.listener.run_jobs()
    r.timers.fire()  # collapsed: lane 0 runs 0, then 1 again
    returned = vp._lane_returned

    def then_b_again(lane: Any, consumer_: Any, batch: Any, started: Any, extra: Any) -> None:
        returned(lane, consumer_, batch, started, extra)
        if batch[0].offset() == 0 and not r.listener.actions:
            r.listener.actions.append(("added",))
            vp.add([FakeRaw(2, key=b)], high_watermark=3)
            if r.listener.jobs:  # another worker takes lane 1's job at once
                r.listener.jobs.pop()()

    vp._lane_returned = then_b_again  # type: ignore[method-assign]
    r.listener.run_jobs()
    runs_of_b = [offset for _, offset, key, _ in consumer.seen if key == "a"]
    assert runs_of_b == sorted(runs_of_b), f"key b ran {runs_of_b}"
    assert r.executor.marked == 3
