"""Consuming in-process: every message once, in order per partition, batches of one partition,
hooks, offsets, flow control, and clear errors for bad settings and routes."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

import conveyor.processing.listener as listener_module
from conveyor import App, ConfigurationError, Consumer, ConveyorError, Producer
from conveyor.instrumentation.background_log import BACKGROUND_LOG
from helpers import Record, running


def make_app(bootstrap: str, **settings: Any) -> App:
    kafka = {
        "bootstrap.servers": bootstrap,
        "group.id": f"test-{uuid.uuid4().hex[:8]}",
        **settings.pop("kafka", {}),
    }
    return App(client_id="test", kafka=kafka, max_wait_time=0.2, **settings)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1, start: int = 0) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "payload": {"n": n}, "partition": n % partitions}
                for n in range(start, start + count)
            ]
        )


def test_every_message_once_in_order_per_partition(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 20_000, partitions=4)
    record = Record()

    lags: list[int | None] = []

    class Orders(Consumer):
        def consume(self) -> None:
            assert {m.partition for m in self.messages} == {self.partition}, (
                "one partition per batch"
            )
            lags.append(self.messages.consumer_lag)
            record.add(*((self.partition, m.offset, m.payload["n"]) for m in self.messages))

    app = make_app(kafka_bootstrap, concurrency=4)
    app.routes.topic(topic, Orders)
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 20_000)
    by_partition: dict[int, list[int]] = {}
    for partition, offset, n in record.items:
        by_partition.setdefault(partition, []).append(offset)
        assert n % 4 == partition
    assert len(record.items) == 20_000, "no duplicates in a clean run"
    for offsets in by_partition.values():
        assert offsets == list(range(5_000))
    assert all(isinstance(lag, int) and 0 <= lag < 5_000 for lag in lags)
    assert 0 in lags, "the last batch of a partition is not behind"


def test_async_consumers_and_lazy_payloads(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 10)
    record = Record()

    class AsyncConsumer(Consumer):
        async def consume(self) -> None:
            await asyncio.sleep(0)
            first = self.messages.first
            assert not first.deserialized
            record.add(*(m.payload["n"] for m in self.messages))
            assert first.raw_payload == b'{"n":%d}' % first.payload["n"]

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, AsyncConsumer)
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 10)
    assert record.items == list(range(10))


def test_a_raising_consume_is_retried_from_the_first_unmarked_message(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 5)
    record = Record()
    failures = {"left": 2}

    class Flaky(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.offset == 3 and failures["left"]:
                    failures["left"] -= 1
                    raise RuntimeError("transient")
                record.add(message.offset)
                self.mark_as_consumed(message)

    app = make_app(kafka_bootstrap, pause_timeout=0.05, pause_max_timeout=0.1)
    app.routes.topic(topic, Flaky)
    with running(app):
        assert record.wait_for(lambda items: 4 in items)
    assert record.items == [0, 1, 2, 3, 4], "retries start at offset 3, nothing before it again"


def test_initial_offset_latest_skips_what_was_there(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 5)
    record = Record()

    class Latest(Consumer):
        def consume(self) -> None:
            record.add(*(m.payload["n"] for m in self.messages))

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Latest, initial_offset="latest")
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda event: assigned.set())
    with running(app):
        assert assigned.wait(30)
        # "latest" is resolved after the assignment, at a moment nobody announces: keep
        # producing new messages until one arrives.
        for attempt in range(60):
            produce(kafka_bootstrap, topic, 1, start=100 + attempt)
            if record.wait_for(bool, timeout=0.5):
                break
    assert record.items, "messages produced after the start arrive"
    assert all(n >= 100 for n in record.items), "nothing from before the start"


@pytest.mark.parametrize(
    ("route_option", "expect_old"),
    [({}, False), ({"initial_offset": "earliest"}, True)],
    ids=["kafka-setting-honoured", "route-option-wins"],
)
def test_the_apps_auto_offset_reset_is_honoured(
    kafka_bootstrap: str, new_topic, route_option: dict[str, Any], expect_old: bool
) -> None:
    """kafka={"auto.offset.reset": "latest"} the librdkafka way starts a new group at the end,
    unless the route says otherwise."""
    topic = new_topic()
    produce(kafka_bootstrap, topic, 5)
    record = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            record.add(*(m.payload["n"] for m in self.messages))

    app = make_app(kafka_bootstrap, kafka={"auto.offset.reset": "latest"})
    app.routes.topic(topic, Reader, **route_option)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda event: assigned.set())
    with running(app):
        assert assigned.wait(30)
        for attempt in range(60):  # "latest" resolves at an unannounced moment (see above)
            produce(kafka_bootstrap, topic, 1, start=100 + attempt)
            if record.wait_for(lambda items: any(n >= 100 for n in items), timeout=0.5):
                break
    assert any(n >= 100 for n in record.items)
    old = [n for n in record.items if n < 100]
    assert old == ([0, 1, 2, 3, 4] if expect_old else [])


def test_direct_assignment_reads_only_the_given_partitions(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 30, partitions=3)
    record = Record()

    class Direct(Consumer):
        def consume(self) -> None:
            record.add(*((self.partition, m.offset) for m in self.messages))

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Direct, assign=[1])
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 10)
    assert {partition for partition, _ in record.items} == {1}
    assert [offset for _, offset in record.items] == list(range(10))


def test_eofed_is_called_at_the_end_of_a_partition(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 3)
    record = Record()

    class Eof(Consumer):
        def consume(self) -> None:
            record.add(*(m.offset for m in self.messages))

        def eofed(self) -> None:
            record.add("eof")

    app = make_app(kafka_bootstrap, kafka={"enable.partition.eof": True})
    app.routes.topic(topic, Eof)
    with running(app):
        assert record.wait_for(lambda items: "eof" in items)
    assert record.items[:4] == [0, 1, 2, "eof"]


def test_the_end_is_reached_after_a_retried_tail(kafka_bootstrap: str, new_topic) -> None:
    """A batch taken once the end of the partition was told, whose consume() raises, goes back
    to wait for its retry: reached_end() runs once it was consumed, not while it waits."""
    topic = new_topic()
    produce(kafka_bootstrap, topic, 6)
    record = Record()
    failures = {"left": 4}  # offset 4 fails its first attempts: the end is told meanwhile

    class Eof(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.offset == 4 and failures["left"]:
                    failures["left"] -= 1
                    raise RuntimeError("not yet")
                record.add(message.offset)
                self.mark_as_consumed(message)

        def reached_end(self) -> None:
            record.add("eof")

    app = make_app(
        kafka_bootstrap, kafka={"enable.partition.eof": True}, pause_timeout=0.5,
        pause_with_exponential_backoff=False,
    )  # fmt: skip
    app.routes.topic(topic, Eof)
    with running(app):
        assert record.wait_for(lambda items: "eof" in items, 30), record.items
    assert record.items[: record.items.index("eof")] == list(range(6))


def test_seek_pause_and_resume(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 6)
    record = Record()
    state = {"sought": False, "paused": False}

    class Steering(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                record.add(message.offset)
                if message.offset == 4 and not state["sought"]:
                    state["sought"] = True
                    self.seek(1)  # read 1.. again
                    return
                if message.offset == 2 and state["sought"] and not state["paused"]:
                    state["paused"] = True
                    self.mark_as_consumed(message)
                    self.pause(timeout=0.3)  # resume at 3 after the timeout
                    return

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Steering, manual_offset_management=True)
    with running(app):
        assert record.wait_for(lambda items: items[-1:] == [5] and state["paused"], timeout=10), (
            record.items
        )
    assert record.items == [0, 1, 2, 3, 4, 1, 2, 3, 4, 5]


def test_steering_from_another_thread_wakes_a_waiting_listener(
    kafka_bootstrap: str, new_topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """app.seek, app.pause and app.resume, called from another thread while the listener waits
    for messages, are run at once (the poll's wait ends for them), not after its poll slice:
    stretched to a minute here, it would outlast each call's 10 s and the test's waits."""
    monkeypatch.setattr(listener_module, "_POLL_SLICE", 60.0)
    topic = new_topic()
    produce(kafka_bootstrap, topic, 3)
    record = Record()

    class Reading(Consumer):
        def consume(self) -> None:
            record.add(*(m.offset for m in self.messages))

    app = App(
        client_id="test", max_wait_time=60.0,
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"},
    )  # fmt: skip
    app.routes.topic(topic, Reading)
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 3, 30), record.items
        assert app.seek(topic, 0, 1) == 1  # the listener waits for messages meanwhile
        assert record.wait_for(lambda items: items[3:] == [1, 2], 15), record.items
        app.pause(topic, 0)
        produce(kafka_bootstrap, topic, 1, start=3)
        app.resume(topic, 0)
        assert record.wait_for(lambda items: 3 in items, 15), record.items


def held_after(app: App, settled: Callable[[Any], bool], timeout: float = 10) -> Any:
    """The app's one partition, once ``settled(partition)`` (what a poll fetched reaches the
    partition just after the poll's event), or as it is after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        [partition] = app.snapshot().partitions
        if settled(partition) or time.monotonic() > deadline:
            return partition
        threading.Event().wait(0.02)  # the snapshot has nothing to wait on


def test_quiet_finishes_running_batches_and_takes_no_new_ones(
    kafka_bootstrap: str, new_topic
) -> None:
    """quiet() while a batch runs: that batch finishes and is committed; what was fetched
    behind it waits, and nothing else runs (the next member of the group starts right after
    the finished batch)."""
    topic = new_topic()
    produce(kafka_bootstrap, topic, 3)
    record = Record()
    inside, release = threading.Event(), threading.Event()

    class Quiet(Consumer):
        def consume(self) -> None:
            offsets = [m.offset for m in self.messages]
            if offsets[0] == 0:
                inside.set()
                assert release.wait(30)
            record.add(*offsets)

    group = f"quiet-{uuid.uuid4().hex[:8]}"
    app = make_app(kafka_bootstrap, kafka={"group.id": group})
    app.routes.topic(topic, Quiet, max_messages=1)  # offset 0 runs alone, 1 and 2 wait
    polled, quieted, consumed = Record(), threading.Event(), threading.Event()
    app.monitor.subscribe("messages.polled", lambda event: polled.add(event["count"]))
    app.monitor.subscribe("app.quieting", lambda event: quieted.set())
    app.monitor.subscribe("consumer.consumed", lambda event: consumed.set())
    with running(app):
        assert inside.wait(30)
        assert polled.wait_for(lambda counts: sum(counts) >= 3), "offsets 1 and 2 fetched"
        app.quiet()
        assert quieted.wait(5)
        assert app.state == "quiet"
        release.set()
        assert consumed.wait(30), "the running batch finished"
        partition = held_after(app, lambda p: p.pending == 2)
    assert record.items == [0], "no batch taken while quiet"
    # 1 and 2 were fetched before quiet() and wait (nothing else exists to fetch: a message
    # produced now could come in a poll in flight or not, as chance has it)
    assert partition.pending == 2, partition
    assert partition.paused, partition
    produce(kafka_bootstrap, topic, 3, start=3)

    after = Record()

    class Next(Consumer):
        def consume(self) -> None:
            after.add(*(m.offset for m in self.messages))

    successor = make_app(kafka_bootstrap, kafka={"group.id": group})
    successor.routes.topic(topic, Next)
    with running(successor):
        assert after.wait_for(lambda items: len(items) >= 5)
    assert after.items == [1, 2, 3, 4, 5], "committed right after the running batch"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"max_messages": "100"}, "max_messages"),
        ({"max_wait_time": -1}, "max_wait_time"),
        ({"pause_timeout": 5, "pause_max_timeout": 1}, "pause_max_timeout"),
        ({"concurency": 4}, "concurency"),
        ({"inline_quick_batches": "yes"}, "inline_quick_batches"),
    ],
)
def test_wrong_settings_fail_at_construction(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        App(client_id="x", kafka={"bootstrap.servers": "127.0.0.1:1"}, **settings)
    assert raised.value.setting == named
    assert named in str(raised.value)


def test_bad_routes_fail_clearly() -> None:
    app = App(client_id="x", kafka={"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ConfigurationError, match=r"not a subclass of conveyor\.Consumer"):
        app.routes.topic("orders", dict)  # type: ignore[arg-type]

    class Orders(Consumer):
        def consume(self) -> None:
            pass

    app.routes.topic("orders", Orders)
    with pytest.raises(ConfigurationError, match="routed twice"):
        app.routes.topic("orders", Orders)
    with pytest.raises(ConfigurationError, match="unknown option 'partitons'"):
        app.routes.topic("payments", Orders, partitons=3)
    empty = App(client_id="y", kafka={"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ConfigurationError, match="no active routes"):
        empty.start()


def test_mark_as_consumed_sync_reports_a_lost_partition(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    group = f"loss-{uuid.uuid4().hex[:8]}"
    revoked = threading.Event()
    started = threading.Event()
    outcome = Record()

    class Holding(Consumer):
        def consume(self) -> None:
            if outcome.items:
                return
            started.set()
            revoked.wait(30)  # a long batch, during which a second member joins
            outcome.add((self.mark_as_consumed_sync(self.messages.last), self.is_revoked()))

    class Idle(Consumer):
        def consume(self) -> None:
            pass

    first = make_app(kafka_bootstrap, kafka={"group.id": group})
    first.routes.topic(topic, Holding)
    first.monitor.subscribe(
        "rebalance.partitions_revoked", lambda event: revoked.set() if event["partitions"] else None
    )
    second = make_app(kafka_bootstrap, kafka={"group.id": group})
    second.routes.topic(topic, Idle)
    with running(first):
        assert started.wait(30)
        with running(second):
            assert outcome.wait_for(bool, timeout=60)
    assert outcome.items[0] == (False, True)


def test_a_base_exception_in_consume_stops_the_app_without_moving_the_offset(
    kafka_bootstrap: str, new_topic, kafka_admin
) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 3)
    group = f"crash-{uuid.uuid4().hex[:8]}"

    class Exiting(Consumer):
        def consume(self) -> None:
            raise SystemExit("the consumer asked the process to exit")

    app = make_app(kafka_bootstrap, kafka={"group.id": group})
    app.routes.topic(topic, Exiting)
    stopped = threading.Event()
    app.monitor.subscribe("app.stopped", lambda event: stopped.set())
    errors: list[str] = []
    app.monitor.subscribe("error.occurred", lambda event: errors.append(event["type"]))
    raised: list[BaseException] = []

    def run() -> None:
        try:
            app.run()
        except ConveyorError as error:
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert stopped.wait(60)
    thread.join(10)
    assert isinstance(app.crash, SystemExit)
    assert raised, "run() raises after a crash"
    assert "app.crash" in errors
    assert [lag for lag in kafka_admin.read_lags([group]) if lag.topic == topic] == [], (
        "nothing was committed"
    )


@pytest.mark.parametrize(
    "options",
    [{}, {"virtual_partitions": {"partitioner": lambda m: m.payload["n"], "max_partitions": 2}}],
    ids=["plain", "virtual partitions"],
)
def test_a_long_running_job_fetches_nothing_behind_it_and_keeps_the_group(
    kafka_bootstrap: str, new_topic, options: dict[str, Any]
) -> None:
    """long_running_job=True: while partition 0's batch runs (8 s, past max.poll.interval.ms)
    nothing more of partition 0 is fetched (a marker on partition 1 is, meanwhile), and the
    member is never kicked out of the group; with virtual partitions too (the partition stays
    paused while any of its lanes runs)."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 1)  # n=0 on partition 0
    record = Record()
    inside, release = threading.Event(), threading.Event()
    revocations: list[object] = []

    class Slow(Consumer):
        def consume(self) -> None:
            if self.partition == 0 and not inside.is_set():
                inside.set()
                release.wait(8)  # longer than max.poll.interval.ms below
            record.add(*((self.partition, m.payload["n"]) for m in self.messages))

    app = make_app(
        kafka_bootstrap,
        concurrency=2,
        kafka={"max.poll.interval.ms": 6000, "session.timeout.ms": 6000},
    )
    app.routes.topic(topic, Slow, long_running_job=True, **options)
    app.monitor.subscribe(
        "rebalance.partitions_revoked", lambda event: revocations.append(event["partitions"])
    )
    loops = Record()  # the listener's loop starts: each runs the queued commands first
    app.monitor.subscribe("connection.listener.fetch_loop", lambda _event: loops.add(1))
    with running(app):
        assert inside.wait(30)
        # The job asked to pause partition 0 before it started; two loop starts later the
        # pause has been applied, so what is produced now is not fetched behind the job.
        seen = len(loops.items)
        assert loops.wait_for(lambda items: len(items) >= seen + 2)
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [*({"topic": topic, "payload": {"n": n}, "partition": 0} for n in (1, 2)),
                 {"topic": topic, "payload": {"n": 99}, "partition": 1}]
            )  # fmt: skip
        assert record.wait_for(lambda items: (1, 99) in items), "partition 1 flows meanwhile"
        [p0] = [p for p in app.snapshot().partitions if p.partition == 0]
        assert (p0.pending, p0.high_watermark) == (0, 1), "nothing fetched behind the long job"
        assert record.wait_for(lambda items: len(items) >= 4, timeout=30)
    assert [n for partition, n in record.items if partition == 0] == [0, 1, 2]
    assert not any(revocations[:-1]), "no rebalance while the long job ran"


def test_partitions_run_in_parallel_on_the_worker_pool(kafka_bootstrap: str, new_topic) -> None:
    """concurrency=2: the batches of two partitions run at the same time (each waits at a
    barrier for the other; one worker thread could never get both there)."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 2, partitions=2)
    met = threading.Barrier(2, timeout=10)
    record = Record()

    class Meeting(Consumer):
        def consume(self) -> None:
            try:
                met.wait()
            except threading.BrokenBarrierError:
                record.add("alone")  # wakes the test's wait at once
                raise
            record.add(self.partition)

    app = make_app(kafka_bootstrap, concurrency=2)
    app.routes.topic(topic, Meeting)
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 2 or "alone" in items)
    assert "alone" not in record.items, "the two partitions never ran at the same time"
    assert sorted(record.items) == [0, 1]


def test_tick_runs_while_a_partition_is_idle(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce(kafka_bootstrap, topic, 1)
    record = Record()

    class Ticking(Consumer):
        def consume(self) -> None:
            record.add("batch")

        def tick(self) -> None:
            record.add("tick")

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Ticking)
    with running(app):
        assert record.wait_for(lambda items: items.count("tick") >= 2, timeout=30)
    assert record.items[0] == "batch"


@pytest.mark.parametrize("lanes", [None, 2], ids=["plain", "virtual partitions"])
def test_an_idle_partition_ticks_while_its_sibling_is_busy(
    kafka_bootstrap: str, new_topic, lanes: int | None
) -> None:
    """Partition 1 never gets a message and partition 0 one every 50 ms (so the listener's polls
    are never empty for the 200 ms max_wait_time): partition 1 ticks all the same."""
    topic = new_topic(partitions=2)
    record = Record()

    class Ticking(Consumer):
        def consume(self) -> None:
            record.add(("batch", self.partition))

        def tick(self) -> None:
            record.add(("tick", self.partition))

    app = make_app(kafka_bootstrap)
    options: dict[str, Any] = (
        {} if lanes is None else {"virtual_partitions": {"max_partitions": lanes}}
    )
    app.routes.topic(topic, Ticking, **options)
    done = threading.Event()

    def feed() -> None:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            for n in range(600):  # at most 30 s
                if done.wait(0.05):
                    return
                producer.produce_sync(topic=topic, payload={"n": n}, partition=0)

    feeder = threading.Thread(target=feed, daemon=True)
    with running(app):
        feeder.start()
        try:
            assert record.wait_for(_ticks_after_a_batch, timeout=30)
        finally:
            done.set()
            feeder.join(10)


def _ticks_after_a_batch(items: list[Any]) -> bool:
    """Partition 1 ticked twice after partition 0 began to get messages."""
    return ("batch", 0) in items and items[items.index(("batch", 0)) :].count(("tick", 1)) >= 2


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "always the pool"])
def test_lone_messages_on_the_listeners_thread_keep_their_order(
    kafka_bootstrap: str, new_topic, inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lone messages of a quick consumer run on the listener's thread (saving the hand-off),
    mixed with pool runs after a slow one, in order and once; switched off, none does."""
    # "Quick" made generous so that a busy machine cannot make these jobs look slow.
    monkeypatch.setattr("conveyor.processing.executor._QUICK_JOB", 0.05)
    topic = new_topic(partitions=1)
    record = Record()

    class Lone(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.payload["n"] == 40:
                    threading.Event().wait(0.2)  # one slow job: back to the pool for a while
                record.add((message.payload["n"], threading.current_thread().name))

    app = make_app(kafka_bootstrap, inline_quick_batches=inline)
    app.routes.topic(topic, Lone)
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for n in range(120):  # lock-step: each poll brings one message
            producer.produce_sync(topic=topic, payload={"n": n})
            assert record.wait_for(lambda items, n=n: len(items) > n)
    assert [n for n, _ in record.items] == list(range(120)), "every message once, in order"
    on_listener = [n for n, thread in record.items if thread.startswith("conveyor-listener")]
    if inline:
        assert on_listener, "a quick partition's lone messages ran on the listener's thread"
        assert 41 not in on_listener, "the job after a slow one goes to the pool"
        assert any(n > 41 for n in on_listener), "quick again after the slow job: back inline"
    else:
        assert on_listener == []


def test_batch_lines_are_logged_when_debug_was_set_up_after_the_app_was_built(
    kafka_bootstrap: str, new_topic, caplog: pytest.LogCaptureFixture
) -> None:
    """The default logging listener listens to consumed batches only while DEBUG is on; an
    app checks again as it starts, so logging set up after the app was built still works."""
    topic = new_topic()
    record = Record()

    class Counted(Consumer):
        def consume(self) -> None:
            record.add(*(message.offset for message in self.messages))

    logger = logging.getLogger("conveyor")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        app = App(client_id="lines", kafka={"bootstrap.servers": kafka_bootstrap,
                                            "group.id": f"test-{uuid.uuid4().hex[:8]}"})  # fmt: skip
        app.routes.topic(topic, Counted)
        caplog.set_level(logging.DEBUG, logger="conveyor")  # after the app was built
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_sync(topic=topic, payload=b"x")
        with running(app):
            assert record.wait_for(lambda offsets: offsets == [0])
        assert BACKGROUND_LOG.flush(10)
    finally:
        logger.setLevel(level)
    assert any(
        r.name == "conveyor" and r.getMessage().startswith(f"consumed {topic}/0: 1 messages")
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


def test_a_failing_batch_waits_longer_each_time_it_fails(kafka_bootstrap: str, new_topic) -> None:
    """Exponential back-off, seen by a running app: pause_timeout 0.5 s doubling (0.5, 1, 2 s)
    between the attempts of a batch that keeps failing; the other partition flows meanwhile."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 2, partitions=2)
    attempts = Record()

    class Flaky(Consumer):
        def consume(self) -> None:
            failures = sum(isinstance(item, float) for item in attempts.items)
            if self.partition == 0 and failures < 4:
                attempts.add(time.monotonic())
                raise RuntimeError("not yet")
            attempts.add((self.partition, self.messages.last.payload["n"]))

    app = make_app(kafka_bootstrap, pause_timeout=0.5, pause_max_timeout=8.0)
    app.routes.topic(topic, Flaky)
    with running(app):
        assert attempts.wait_for(lambda items: (0, 0) in items, 30)
    times = [item for item in attempts.items if isinstance(item, float)]
    assert len(times) == 4
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert gaps[0] >= 0.45, gaps
    for shorter, longer in itertools.pairwise(gaps):
        assert longer >= 1.5 * shorter, f"each pause longer than the last: {gaps}"
    assert (1, 1) in attempts.items


def test_a_lone_message_goes_on_at_once_while_a_burst_fills_batches(
    kafka_bootstrap: str, new_topic
) -> None:
    """Adaptive polling, seen by a running app: a message that comes alone is handed on without
    waiting for more (max_wait_time is long here), and a burst is consumed in full batches."""
    topic = new_topic(partitions=1)
    batches = Record()

    class Sizes(Consumer):
        def consume(self) -> None:
            produced_at = self.messages.last.timestamp
            assert produced_at is not None
            batches.add((len(self.messages), time.time() - produced_at.timestamp()))

    app = App(
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}"},
        max_messages=100,
        max_wait_time=5.0,
    )
    app.routes.topic(topic, Sizes)
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for n in range(5):
            producer.produce_sync(topic=topic, payload={"n": n})
            assert batches.wait_for(lambda items, n=n: len(items) == n + 1, 30)
        lone = list(batches.items)
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in range(2000)])
        assert batches.wait_for(lambda items: sum(size for size, _ in items) == 2005, 30)
    assert [size for size, _ in lone] == [1] * 5
    waits = sorted(latency for _, latency in lone)
    # a lone message that waited for company would wait a poll slice (0.5 s) or more
    assert waits[2] < 0.25, f"lone messages handed on at once: {waits}"
    burst = [size for size, _ in batches.items[5:]]
    assert max(burst) == 100, burst
    assert len(burst) <= 40, f"a burst in full batches, not one by one: {burst}"
