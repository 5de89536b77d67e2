"""Windows without a broker, through ``conveyor.testing``: tumbling, hopping, sliding and
session windows close by the partition's stream time (not per key), the grace boundary, late
messages, every aggregation, ``emit="update"``, ``tick()`` and the route option's consumer."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Message as KafkaMessage

from conveyor import App, ConfigurationError, Consumer, testing
from conveyor.messages import Deserializers, Message, Messages
from conveyor.serialization import json_dumps
from conveyor.state import (
    Collect,
    Count,
    Hopping,
    Latest,
    Max,
    Mean,
    Min,
    Reduce,
    Session,
    Sliding,
    Store,
    Sum,
    Tumbling,
)
from conveyor.state.backends import MemoryBackend
from conveyor.state.clock import use_clock
from conveyor.state.view import State
from conveyor.state.windows import PartitionWindow, Window
from conveyor.testing import Record

MINUTE = 60_000


def app() -> App:
    return App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})


def feed(consumer: Consumer, *messages: tuple[str, int, Any]) -> list[Any]:
    """Feed (key, timestamp ms, payload) messages as one batch; what the window emitted."""
    for key, timestamp, payload in messages:
        testing.produce(consumer, payload, key=key, timestamp=timestamp)
    testing.consume(consumer)
    return consumer.emitted  # type: ignore[attr-defined, no-any-return]


def consumer_with(windowed: Any, **route: Any) -> Consumer:
    class Windows(Consumer):
        window = windowed

        def consume(self) -> None:
            self.emitted = self.window.update(self.messages)

    under_test = app()
    under_test.routes.topic("clicks", Windows, **route)
    testing.capture(under_test)
    return testing.consumer_for(under_test, "clicks")


def as_tuples(results: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.key, r.start, r.end, r.value, r.final) for r in results]


def test_a_tumbling_window_closes_by_the_partition_s_stream_time_not_per_key() -> None:
    consumer = consumer_with(Tumbling(60).agg(count=Count(), amount=Sum("amount")))
    assert feed(consumer, ("a", 1_000, {"amount": 2}), ("a", 59_000, {"amount": 3})) == []
    # b's message moves stream time past a's window: a's closes though a said nothing more
    closed = feed(consumer, ("b", 61_000, {"amount": 1}))
    assert as_tuples(closed) == [
        ("a", 0, MINUTE, {"start": 0, "end": MINUTE, "count": 2, "amount": 5}, True)
    ]
    assert consumer.stores["window"].get((0, MINUTE, "a")) is None, "a closed window is deleted"


@pytest.mark.parametrize(
    "windowed",
    [Tumbling(60, grace=10).count(), Tumbling(60, grace=10).agg(count=Count(), last=Latest())],
    ids=["count column-wise", "message by message"],
)
def test_the_grace_boundary_and_late_messages(windowed: Any) -> None:
    consumer = consumer_with(windowed)
    feed(consumer, ("a", 1_000, {}))
    # at 65 s the first minute is over, but 30 s is within its grace: it is counted
    assert feed(consumer, ("a", 65_000, {}), ("a", 30_000, {})) == []
    assert consumer.window.late == []
    # stream time at the end plus grace closes it; 40 s comes too late for it
    closed = feed(consumer, ("a", 70_000, {}), ("a", 40_000, {}))
    assert [(r.start, r.value["count"]) for r in closed] == [(0, 2)]
    assert [m.timestamp.timestamp() * 1000 for m in consumer.window.late] == [40_000]
    # a later batch still knows the stream time: an old message is late, no window reopens
    assert feed(consumer, ("a", 20_000, {})) == []
    assert [m.timestamp.timestamp() * 1000 for m in consumer.window.late] == [20_000]
    assert consumer.stores["window"].get((0, MINUTE, "a")) is None
    assert consumer.stores["window"].late == 2, "counted for the Stores page"


def test_a_hopping_window_counts_a_message_in_each_window_it_falls_in() -> None:
    consumer = consumer_with(Hopping(60, step=20).count())
    feed(consumer, ("a", 45_000, {}))
    closed = feed(consumer, ("a", 200_000, {}))
    assert [(r.start, r.end, r.value["count"]) for r in closed] == [
        (0, 60_000, 1),
        (20_000, 80_000, 1),
        (40_000, 100_000, 1),
    ]


def test_sessions_grow_merge_and_close_after_their_gap() -> None:
    consumer = consumer_with(Session(30).agg(count=Count(), seen=Collect("n")))
    t = 1_000_000  # (0 would be "now" to a producer)
    # two sessions of a (t to t+20 s, and t+70 s), then t+45 s bridges them: within 30 s of each
    opened = feed(
        consumer,
        ("a", t, {"n": 1}), ("a", t + 20_000, {"n": 2}), ("a", t + 70_000, {"n": 3}),
        ("a", t + 45_000, {"n": 4}),
    )  # fmt: skip
    assert opened == [], "nothing closed: the merged session ends 30 s after t+70 s"
    closed = feed(consumer, ("b", t + 100_000, {"n": 9}))
    end = t + 70_001
    assert as_tuples(closed) == [
        ("a", t, end, {"start": t, "end": end, "count": 4, "seen": [1, 2, 3, 4]}, True)
    ]


def test_sliding_windows_are_kafka_streams_five_windows_of_its_example() -> None:
    # SlidingWindows' javadoc: a 5 s time difference, A's values 1, 2, 3 at 8 s, 9.2 s, 12.4 s
    consumer = consumer_with(Sliding(5).agg(seen=Collect("v")))
    first = feed(consumer, ("A", 8_000, {"v": 1}), ("A", 9_200, {"v": 2}), ("A", 12_400, {"v": 3}))
    # stream time 12.4 s is past the ends of the first two
    closed = first + feed(consumer, ("B", 100_000, {"v": 9}))  # B's time closes A's others
    assert [(r.key, r.start, r.end - 1, r.value["seen"], r.final) for r in closed] == [
        ("A", 3_000, 8_000, [1], True),  # the first value enters
        ("A", 4_200, 9_200, [1, 2], True),
        ("A", 7_400, 12_400, [1, 2, 3], True),
        ("A", 8_001, 13_001, [2, 3], True),  # the first drops out
        ("A", 9_201, 14_201, [3], True),  # the second drops out
    ]
    assert consumer.stores["window"].get(("records", "A")) is None, "A's messages are gone"


def test_a_sliding_window_takes_late_and_out_of_order_messages_by_its_grace() -> None:
    consumer = consumer_with(Sliding(10, grace=5).count().updates())
    t = 1_000_000
    assert as_tuples(feed(consumer, ("a", t + 30_000, {}))) == [
        ("a", t + 20_000, t + 30_001, {"start": t + 20_000, "end": t + 30_001, "count": 1}, False)
    ]
    # 25 s is out of order but inside the window ending at 30 s: that window changes, and one
    # ends at 25 s; 14 s is too old for any window still open (it would close by 29 s + grace)
    changed = feed(consumer, ("a", t + 25_000, {}), ("a", t + 14_000, {}))
    assert [(r.start - t, r.end - 1 - t, r.value["count"]) for r in changed] == [
        (15_000, 25_000, 1),
        (20_000, 30_000, 2),
    ]
    assert [m.timestamp.timestamp() * 1000 - t for m in consumer.window.late] == [14_000]
    closed = feed(consumer, ("a", t + 60_000, {}))
    assert [(r.start - t, r.end - 1 - t, r.value["count"], r.final) for r in closed if r.final] == [
        (15_000, 25_000, 1, True),
        (20_000, 30_000, 2, True),
        (25_001, 35_001, 1, True),  # after 25 s drops out: 30 s alone
    ]


def test_a_failed_batch_leaves_the_sliding_windows_as_the_store_held_them() -> None:
    class FailsOnce(Consumer):
        window = Sliding(5).count()
        failures = 0

        def consume(self) -> None:
            self.emitted = self.window.update(self.messages)
            if FailsOnce.failures:
                FailsOnce.failures -= 1
                raise RuntimeError("boom")

    under_test = app()
    under_test.routes.topic("clicks", FailsOnce)
    testing.capture(under_test)
    consumer = testing.consumer_for(under_test, "clicks")
    feed(consumer, ("a", 8_000, {}), ("a", 9_000, {}))
    FailsOnce.failures = 1  # the windows are reloaded from the store after this
    testing.produce(consumer, {}, key="a", timestamp=9_500)
    with pytest.raises(RuntimeError):
        testing.consume(consumer)
    closed = feed(consumer, ("b", 50_000, {}))  # with the 9.5 s message's retry
    assert [(r.start, r.end - 1, r.value["count"]) for r in closed] == [
        (4_000, 9_000, 2),  # (the one ending at 8 s closed with the first batch)
        (4_500, 9_500, 3),
        (8_001, 13_001, 2),  # the window after 8 s, known again from the store
        (9_001, 14_001, 1),
    ], "the failed batch's message is counted once: its attempt left nothing"


def test_every_aggregation() -> None:
    windowed = Tumbling(60).agg(
        count=Count(),
        total=Sum("v"),
        low=Min("v"),
        high=Max("v"),
        mean=Mean("v"),
        last=Latest("v"),
        all=Collect("v"),
        product=Reduce(lambda acc, v: acc * v, initial=1, field="v"),
        keys=Count(),
    )
    consumer = consumer_with(windowed)
    feed(consumer, ("a", 3_000, {"v": 4}), ("a", 1_000, {"v": 2}), ("a", 2_000, {"v": 5}))
    [closed] = feed(consumer, ("b", 60_000, {"v": 0}))
    assert closed.value == {
        "start": 0, "end": MINUTE, "count": 3, "total": 11, "low": 2, "high": 5,
        "mean": 11 / 3, "last": 4, "all": [4, 2, 5], "product": 40, "keys": 3,
    }  # fmt: skip


def test_emit_update_tells_each_change_and_then_the_close() -> None:
    consumer = consumer_with(Tumbling(60).count().updates())
    changes = feed(consumer, ("a", 1_000, {}), ("a", 2_000, {}))
    assert [(r.value["count"], r.final) for r in changes] == [(1, False), (2, False)]
    assert [(r.value["count"], r.final) for r in feed(consumer, ("a", 60_000, {}))] == [
        (1, False),
        (2, True),
    ]


def test_tick_closes_a_silent_partition_s_windows_by_the_wall_clock() -> None:
    consumer = consumer_with(Tumbling(60).count())
    feed(consumer, ("a", 1_000, {}))
    assert consumer.window.tick(now=59.0) == []
    [closed] = consumer.window.tick(now=60.0)
    assert closed.value["count"] == 1


def test_a_failed_batch_leaves_the_windows_as_they_were() -> None:
    class Fails(Consumer):
        window = Tumbling(60).count()

        def consume(self) -> None:
            self.emitted = self.window.update(self.messages)
            if any(m.payload.get("boom") for m in self.messages):
                raise RuntimeError("boom")

    under_test = app()
    under_test.routes.topic("clicks", Fails)
    testing.capture(under_test)
    consumer = testing.consumer_for(under_test, "clicks")
    feed(consumer, ("a", 1_000, {}))
    testing.produce(consumer, {"boom": True}, key="a", timestamp=2_000)
    with pytest.raises(RuntimeError):
        testing.consume(consumer)
    assert consumer.stores["window"][(0, MINUTE, "a")] == [1], "the failed batch's count is gone"


@pytest.mark.parametrize(
    ("windowed", "span"),
    [(Tumbling(60).count(), (0, MINUTE)), (Session(60).count(), (1_000, 1_001))],
    ids=["tumbling", "session"],
)
def test_a_window_a_failed_batch_closed_closes_again_when_the_batch_runs_again(
    windowed: Any, span: tuple[int, int]
) -> None:
    start, end = span

    class FailsOnce(Consumer):
        window = windowed
        failures = 1

        def consume(self) -> None:
            self.emitted = self.window.update(self.messages)
            if FailsOnce.failures:
                FailsOnce.failures -= 1
                raise RuntimeError("boom")

    under_test = app()
    under_test.routes.topic("clicks", FailsOnce)
    testing.capture(under_test)
    consumer = testing.consumer_for(under_test, "clicks")
    FailsOnce.failures = 0
    assert feed(consumer, ("a", 1_000, {})) == []
    FailsOnce.failures = 1  # b's message closes a's window, then the batch fails
    testing.produce(consumer, {}, key="b", timestamp=61_000)
    with pytest.raises(RuntimeError):
        testing.consume(consumer)
    assert as_tuples(consumer.emitted) == [  # type: ignore[attr-defined]
        ("a", start, end, {"start": start, "end": end, "count": 1}, True)
    ]
    closed = feed(consumer, ("b", 61_000, {}))  # its retry
    assert as_tuples(closed) == [("a", start, end, {"start": start, "end": end, "count": 1}, True)]


def test_a_route_window_emits_to_its_topic_and_sends_late_messages_on() -> None:
    under_test = app()
    under_test.routes.topic(
        "clicks", window=Tumbling(60).count().to("clicks-1m", late_to="clicks-late")
    )
    captured = testing.capture(under_test)
    consumer = testing.consumer_for(under_test, "clicks")
    for key, timestamp in (("a", 1_000), ("a", 2_000), ("b", 60_000), ("a", 3_000)):
        testing.produce(consumer, {"n": 1}, key=key, timestamp=timestamp)
    testing.consume(consumer)
    results = testing.produced(under_test, "clicks-1m")
    assert [(m.key, m.payload) for m in results] == [("a", {"start": 0, "end": MINUTE, "count": 2})]
    assert [m.key for m in testing.produced(under_test, "clicks-late")] == ["a"]
    assert captured is not None


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: Tumbling(0), "size must be at least"),
        (lambda: Tumbling("1m"), "seconds or a timedelta"),  # type: ignore[arg-type]
        (lambda: Hopping(10, step=20), "step must not be longer"),
        (lambda: Tumbling(60).agg(), "at least one aggregation"),
        (lambda: Tumbling(60).agg(start=Count()), "not be named"),
        (lambda: Tumbling(60).count().to(""), "topic name"),
    ],
)
def test_a_malformed_window_is_refused(make: Any, text: str) -> None:
    with pytest.raises(ConfigurationError, match=text):
        make()


def test_a_route_window_needs_its_output_and_no_consumer_class() -> None:
    class Noop(Consumer):
        def consume(self) -> None:
            pass

    with pytest.raises(ConfigurationError, match="with its output"):
        app().routes.topic("clicks", window=Tumbling(60).count())
    with pytest.raises(ConfigurationError, match="drop the consumer class"):
        app().routes.topic("clicks", Noop, window=Tumbling(60).count().to("out"))


def test_a_stream_clock_stamps_messages_and_closes_windows_by_tick() -> None:
    consumer = consumer_with(Tumbling(60).count())
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with testing.stream_clock(start) as clock:
        feed(consumer, ("a", None, {}))  # stamped with the clock's time
        clock.advance(59)
        assert consumer.window.tick() == [], "59 s in: the minute is still open"
        clock.advance(1)
        [closed] = consumer.window.tick()
    begin = int(start.timestamp() * 1000)
    assert (closed.key, closed.start, closed.value["count"]) == ("a", begin, 1)
    with (
        pytest.raises(ConfigurationError, match="aware"),
        testing.stream_clock(datetime(2026, 1, 1)),
    ):
        pass


class _Partition:
    """A consumer as its windows see it: one store, written the way the engine does (a batch
    that ends well is kept until the next flush; a failed one is discarded)."""

    def __init__(self, store_name: str = "window") -> None:
        self.stores = {store_name: State(store_name, Store(keys="json"), MemoryBackend())}


def _messages(*fed: tuple[str, int, Any]) -> list[Message]:
    return [
        Message(Record("clicks", 0, offset, json_dumps(payload), key.encode(), None, at),
                Deserializers())
        for offset, (key, at, payload) in enumerate(fed)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "windowed",
    [Tumbling(60).agg(count=Count(), all=Collect()), Hopping(60, 30).agg(all=Collect())],
    ids=["tumbling", "hopping"],
)
def test_a_failed_batch_leaves_the_kept_batches_windows_unchanged(windowed: Any) -> None:
    """Between two flushes a window's accumulators sit in the store's kept layer as objects:
    a batch that fails after adding to them must not have changed them in place, or its retry
    counts its messages twice."""
    partition = _Partition()
    window = PartitionWindow(windowed, partition)
    state = partition.stores["window"]
    window.update(_messages(("a", 31_000, 1)))
    state.keep()  # batch 1 ended well, not flushed yet
    window.update(_messages(("a", 32_000, 2)))
    state.discard()  # batch 2 failed
    window.update(_messages(("a", 32_000, 2)))  # its retry
    state.keep()
    closed = window.update(_messages(("b", 200_000, 3)))
    assert [r.value["all"] for r in closed if r.key == "a"] == [[1, 2]] * len(
        windowed.window.windows_for(31_000)
    ), "each message once in each of its windows"


@pytest.mark.parametrize("grace", [0, 2_000])
def test_a_tumbling_count_counted_column_wise_agrees_with_message_by_message(grace: int) -> None:
    """A tumbling window's lone count folds a batch column-wise; a count beside another
    aggregation goes message by message. Out-of-order and late messages, messages without a
    timestamp and windows closing mid-batch: both emit the same, and call the same late."""
    rng = random.Random(7)

    def bound(windowed: Any) -> PartitionWindow:
        holder = type("Holder", (), {})()
        holder.stores = {"window": State("window", windowed.store(), MemoryBackend())}
        return windowed.bind(holder)  # type: ignore[no-any-return]

    column = bound(Tumbling(5, grace=grace / 1000).count())
    by_message = bound(Tumbling(5, grace=grace / 1000).agg(count=Count(), last=Latest()))
    moment, offset, emitted = 0, 0, 0
    previous = use_clock(lambda: 30.0)  # the time of a message without a timestamp
    try:
        for _batch in range(80):
            records = []
            for _ in range(rng.randint(1, 40)):
                moment += rng.randint(0, 300)
                late = moment - 9_000 if rng.random() < 0.05 and _batch else moment
                untimed = rng.random() < 0.01 or offset == 0
                stamp = (0, -1) if untimed else (1, late)
                records.append(
                    KafkaMessage(
                        topic="clicks", partition=0, offset=offset, value=b"{}",
                        key=f"k{rng.randint(0, 6)}".encode(), timestamp=stamp,
                    )
                )  # fmt: skip
                offset += 1
            results = []
            for window in (column, by_message):
                closed = window.update(Messages(records, Deserializers(), "clicks", 0))
                late_ones = [m.offset for m in window.late]
                results.append(([(r.key, r.start, r.value["count"]) for r in closed], late_ones))
            assert results[0] == results[1]
            emitted += len(results[0][0])
    finally:
        use_clock(previous)
    assert emitted > 100, "windows closed along the way"


def _batch(*fed: tuple[str, int]) -> Messages:
    """A batch as the engine hands it over (a lone tumbling count folds it column-wise)."""
    records = [
        KafkaMessage(topic="clicks", partition=0, offset=offset, value=b"{}", key=key.encode(),
                     timestamp=(1, at))
        for offset, (key, at) in enumerate(fed)
    ]  # fmt: skip
    return Messages(records, Deserializers(), "clicks", 0)


def _one_by_one(*fed: tuple[str, int]) -> list[Message]:
    """The same messages as a list (folded message by message)."""
    return _messages(*((key, at, {}) for key, at in fed))


def _written(state: State) -> dict[Any, Any]:
    """What the store's next flush writes, decoded (``None``: deleted)."""
    decode_key = Store(keys="json").key_codec.decode
    return {
        decode_key(key): None if value is None else json.loads(value)
        for key, value in state.changes().items()
    }


@pytest.mark.parametrize("feed", [_batch, _one_by_one], ids=["column-wise", "by-message"])
def test_a_window_writes_a_key_once_a_flush_and_nothing_for_a_window_closed_between_two(
    feed: Any,
) -> None:
    partition = _Partition()
    window = PartitionWindow(Tumbling(60).count(), partition)
    state = partition.stores["window"]
    window.update(feed(("a", 1_000), ("b", 2_000)))
    state.keep()
    window.update(feed(("a", 3_000)))
    state.keep()
    assert _written(state) == {
        (0, MINUTE, "a"): [2], (0, MINUTE, "b"): [1], "stream-time": 3_000,
    }, "one record per window and key, however many batches changed it"  # fmt: skip
    state.commit_to_backend()
    window.update(feed(("a", 61_000)))  # closes [0, 60 s) and opens [60 s, 120 s)
    state.keep()
    closed = window.update(feed(("c", 125_000)))  # closes [60 s, 120 s) before any flush
    state.keep()
    assert [(r.key, r.start, r.value["count"]) for r in closed] == [("a", MINUTE, 1)]
    assert _written(state) == {
        (0, MINUTE, "a"): None, (0, MINUTE, "b"): None,  # the flushed window's keys deleted
        (2 * MINUTE, 3 * MINUTE, "c"): [1], "stream-time": 125_000,
    }, "the window that opened and closed between two flushes writes nothing"  # fmt: skip


@pytest.mark.parametrize("feed", [_batch, _one_by_one], ids=["column-wise", "by-message"])
def test_a_failed_flush_drops_the_unflushed_counts_and_a_new_owner_reads_the_flushed(
    feed: Any,
) -> None:
    backend = MemoryBackend()
    partition = _Partition()
    partition.stores["window"] = state = State("window", Store(keys="json"), backend)
    window = PartitionWindow(Tumbling(60).count(), partition)
    window.update(feed(("a", 1_000)))
    state.keep()
    state.commit_to_backend()  # a: 1 in the store
    window.update(feed(("a", 2_000), ("b", 2_000)))
    state.keep()
    state.discard_all()  # the flush failed: its batches run again
    assert not state.dirty, "nothing of the dropped batches is left for a flush to write"
    window.update(feed(("a", 2_000), ("b", 2_000)))  # the retry
    state.keep()
    state.commit_to_backend()
    successor = _Partition()  # another process, the same store partition
    successor.stores["window"] = State("window", Store(keys="json"), backend)
    moved = PartitionWindow(Tumbling(60).count(), successor)
    closed = moved.update(feed(("z", 61_000)))
    assert [(r.key, r.value["count"]) for r in closed] == [("a", 2), ("b", 1)]


def test_a_session_that_grew_between_two_flushes_writes_its_last_extent_only() -> None:
    partition = _Partition()
    window = PartitionWindow(Session(10).count(), partition)
    state = partition.stores["window"]
    window.update(_one_by_one(("a", 1_000)))
    state.keep()
    state.commit_to_backend()  # [1 s, 1 s] in the store
    for at in (2_000, 3_000, 4_000):  # it grows batch by batch: a new extent each time
        window.update(_one_by_one(("a", at)))
        state.keep()
    assert _written(state) == {
        (1_000, 1_000, "a"): None,  # the flushed extent deleted
        (1_000, 4_000, "a"): [4],  # the last one written; those in between leave nothing
        "stream-time": 4_000,
    }


@pytest.mark.parametrize("feed", [_batch, _one_by_one], ids=["column-wise", "by-message"])
def test_after_a_flush_that_failed_half_way_a_window_that_closes_deletes_every_key(
    feed: Any,
) -> None:
    """A flush that fails may have put some of its records in the changelog and none in the
    store: until a flush goes well, a window that closes deletes each of its keys, or a
    restore from the changelog would bring the closed window back."""
    partition = _Partition()
    window = PartitionWindow(Tumbling(60).count(), partition)
    state = partition.stores["window"]
    window.update(feed(("a", 1_000)))
    state.keep()
    assert (0, MINUTE, "a") in _written(state)  # this record reaches the changelog, then
    state.discard_all()  # the flush fails
    window.update(feed(("a", 1_000)))  # the batch again
    state.keep()
    window.update(feed(("z", 61_000)))  # the window closes before the next flush
    state.keep()
    assert _written(state)[0, MINUTE, "a"] is None, "its key is deleted from the changelog"
    state.commit_to_backend()
    window.update(feed(("y", 62_000), ("z", 121_000)))  # a flush went well: sure again
    state.keep()
    assert (MINUTE, 2 * MINUTE, "y") not in _written(state)


def test_a_fixed_window_of_one_s_own_is_folded_as_the_built_in_ones() -> None:
    class HalfPast(Window):
        """Minutes that start at half past (a window of one's own: its ``windows_for``)."""

        grace = 0

        def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
            start = timestamp - (timestamp - 30_000) % MINUTE
            return [(start, start + MINUTE)]

    partition = _Partition()
    window = PartitionWindow(HalfPast().count(), partition)
    window.update(_one_by_one(("a", 40_000), ("a", 80_000)))
    closed = window.update(_one_by_one(("b", 95_000)))
    assert [(r.key, r.start, r.value["count"]) for r in closed] == [("a", 30_000, 2)]
