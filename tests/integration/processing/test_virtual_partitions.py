"""Virtual partitions against the real broker: per-key order with 16 lanes over one partition,
a failure that collapses and recovers, a SIGKILL mid-stream, a rebalance mid-stream."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

import confluent_kafka

from conveyor import App, Consumer, Producer
from conveyor.instrumentation import events as ev
from helpers import Record, running
from integration.processing.test_server import Server


def make_app(bootstrap: str, group: str | None = None, **settings: Any) -> App:
    kafka = {
        "bootstrap.servers": bootstrap,
        "group.id": group or f"test-{uuid.uuid4().hex[:8]}",
        "auto.commit.interval.ms": 200,
        **settings.pop("kafka", {}),
    }
    return App(client_id="test", kafka=kafka, max_wait_time=0.2, **settings)


def produce_keyed(
    bootstrap: str, topic: str, keys: int, sequences: int, partitions: int = 1
) -> int:
    """``sequences`` rounds over ``keys`` keys (key k goes to partition k % partitions)."""
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        producer.produce_many_sync(
            [
                {
                    "topic": topic,
                    "key": f"k{key}",
                    "payload": {"seq": seq},
                    "partition": key % partitions,
                }
                for seq in range(sequences)
                for key in range(keys)
            ]
        )
    return keys * sequences


def first_processing_order(seen: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Per key, its sequence numbers in the order each was first processed."""
    order: dict[str, list[int]] = {}
    done: set[tuple[str, int]] = set()
    for key, seq in seen:
        if (key, seq) not in done:
            done.add((key, seq))
            order.setdefault(key, []).append(seq)
    return order


def assert_in_order(order: dict[str, list[int]], keys: int, sequences: int) -> None:
    assert len(order) == keys
    for key, seqs in order.items():
        assert seqs == list(range(sequences)), f"{key}: {seqs[:20]}..."


def test_sixteen_lanes_keep_every_keys_order_and_lose_nothing(
    kafka_bootstrap: str, new_topic
) -> None:
    """1,000 keys x 100 sequence numbers through one partition, 16 lanes, 0-2 ms per message."""
    topic = new_topic(partitions=1)
    total = produce_keyed(kafka_bootstrap, topic, keys=1_000, sequences=100)
    seen: list[tuple[str, int, int | None]] = []
    record = Record()

    class Sleepy(Consumer):
        def consume(self) -> None:
            batch = []
            for message in self.messages:
                time.sleep(random.uniform(0, 0.002))
                batch.append((message.key, message.payload["seq"], self.virtual_partition))
            seen.extend(batch)
            record.add(len(batch))

    app = make_app(kafka_bootstrap, concurrency=16)
    app.routes.topic(topic, Sleepy, virtual_partitions={"max_partitions": 16})
    lanes_used: set[int] = set()
    with running(app):
        assert record.wait_for(lambda counts: sum(counts) >= total, timeout=240)
        snapshot = app.snapshot()
    assert len(seen) == total, "every message once"
    assert_in_order(first_processing_order((k, s) for k, s, _ in seen), 1_000, 100)
    lanes_used = {lane for _, _, lane in seen if lane is not None}
    assert lanes_used == set(range(16)), "the keys spread over every lane"
    [partition] = snapshot.partitions
    assert len(partition.lanes) == 16
    assert sum(lane.handed_out for lane in partition.lanes) == total


def test_a_failure_retries_collapses_and_goes_on_in_order(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    keys, sequences = 50, 40
    total = produce_keyed(kafka_bootstrap, topic, keys=keys, sequences=sequences)
    seen: list[tuple[str, int, bool]] = []
    record = Record()
    failed = threading.Event()

    class Flaky(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                key, seq = message.key, message.payload["seq"]
                if (key, seq) == ("k7", 20) and not failed.is_set():
                    failed.set()
                    raise RuntimeError("k7/20 fails once")
                time.sleep(0.0005)
                seen.append((key, seq, self.collapsed))
                self.mark_as_consumed(message)
            record.add(1)

    app = make_app(kafka_bootstrap, concurrency=8, pause_timeout=0.3)
    app.routes.topic(topic, Flaky, virtual_partitions={"max_partitions": 8}, max_messages=10)
    events: list[str] = []
    for name in (ev.VIRTUAL_PARTITIONS_COLLAPSED, ev.VIRTUAL_PARTITIONS_RESTORED):
        app.monitor.subscribe(name, lambda event, name=name: record.add(0) or events.append(name))
    with running(app):
        assert record.wait_for(
            lambda _: (
                len({(k, s) for k, s, _ in seen}) >= total
                and ev.VIRTUAL_PARTITIONS_RESTORED in events
            ),
            timeout=120,
        )
    assert failed.is_set()
    assert events[:2] == [ev.VIRTUAL_PARTITIONS_COLLAPSED, ev.VIRTUAL_PARTITIONS_RESTORED]
    assert_in_order(first_processing_order((k, s) for k, s, _ in seen), keys, sequences)
    collapsed = [(k, s) for k, s, flag in seen if flag]
    assert ("k7", 20) in collapsed, "the failed message ran again, collapsed"
    assert len(seen) == total, "marked per message: nothing finished ran twice"


def test_a_killed_server_skips_nothing_and_never_committed_past_an_unfinished_message(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    keys, sequences = 200, 30
    total = produce_keyed(kafka_bootstrap, topic, keys=keys, sequences=sequences)
    group = f"lanes-kill-{uuid.uuid4().hex[:8]}"

    def processed(lines: list[str]) -> set[int]:
        return {int(line.split()[1]) for line in lines if line.startswith("p ")}

    first = Server(topic, group, kafka_bootstrap, slow=0.004, app="lanes_app:app")
    try:
        assert first.wait_for(
            lambda lines: (
                sum(line.startswith("commit") for line in lines) >= 5
                and len(processed(lines)) > total // 5
            ),
            timeout=90,
        )
    finally:
        first.process.kill()
        first.process.wait(30)
    first_lines = [line for line in first.lines if line != "<eof>"]
    assert len(processed(first_lines)) < total, "the kill came mid-stream"

    second = Server(topic, group, kafka_bootstrap, app="lanes_app:app")
    assert second.wait_for(
        lambda lines: len(processed(first_lines) | processed(lines)) >= total, 120
    )
    assert second.stop() == 0
    lines = first_lines + [line for line in second.lines if line != "<eof>"]

    assert processed(lines) == set(range(total)), "every message processed, none skipped"
    messages = [line.split() for line in lines if line.startswith("p ")]
    assert_in_order(first_processing_order((m[2], int(m[3])) for m in messages), keys, sequences)
    # Every commit: each offset below it was processed before the commit was made.
    done: set[int] = set()
    commits = 0
    low = 0  # everything below the lowest offset not processed yet
    for line in lines:
        if line.startswith("p "):
            done.add(int(line.split()[1]))
            while low in done:
                low += 1
        elif line.startswith("commit "):
            commits += 1
            committed = int(line.split()[1])
            assert committed <= low, f"committed {committed} while {low} was unfinished"
    assert commits >= 5


def test_a_rebalance_mid_stream_loses_nothing(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    keys, sequences = 40, 60
    total = produce_keyed(kafka_bootstrap, topic, keys=keys, sequences=sequences, partitions=2)
    group = f"lanes-rebalance-{uuid.uuid4().hex[:8]}"
    seen: list[tuple[str, int]] = []
    by_app: dict[str, int] = {"first": 0, "second": 0}
    record = Record()

    def lanes_app(name: str) -> App:
        class Slow(Consumer):
            def consume(self) -> None:
                batch = []
                for message in self.messages:
                    time.sleep(0.02)
                    batch.append((message.key, message.payload["seq"]))
                seen.extend(batch)
                by_app[name] += len(batch)
                record.add(len(batch))

        app = make_app(
            kafka_bootstrap, group=group, concurrency=8, kafka={"session.timeout.ms": 6_000}
        )
        app.routes.topic(topic, Slow, virtual_partitions={"max_partitions": 4}, max_messages=5)
        return app

    with running(lanes_app("first")):
        assert record.wait_for(lambda counts: sum(counts) >= total // 10, timeout=60)
        with running(lanes_app("second")):
            assert record.wait_for(lambda _: len(set(seen)) >= total, timeout=120), (
                f"{len(set(seen))} of {total}"
            )
    assert by_app["second"] > 0, "the second member took partitions mid-stream"
    assert {(f"k{k}", s) for k in range(keys) for s in range(sequences)} == set(seen)
    assert_in_order(first_processing_order(seen), keys, sequences)


def test_async_lanes_run_concurrently_on_the_event_loop(kafka_bootstrap: str, new_topic) -> None:
    """With one worker thread, 16 lanes of an async consumer still wait on I/O together."""
    topic = new_topic(partitions=1)
    keys, sequences = 64, 10
    total = produce_keyed(kafka_bootstrap, topic, keys=keys, sequences=sequences)
    seen: list[tuple[str, int]] = []
    running_now = {"now": 0, "most": 0}
    record = Record()

    class AsyncIO(Consumer):
        async def consume(self) -> None:
            running_now["now"] += 1  # one loop thread: no lock needed
            running_now["most"] = max(running_now["most"], running_now["now"])
            try:
                for message in self.messages:
                    await asyncio.sleep(0.005)
                    seen.append((message.key, message.payload["seq"]))
            finally:
                running_now["now"] -= 1
            record.add(len(self.messages))

    app = make_app(kafka_bootstrap, concurrency=1)
    app.routes.topic(topic, AsyncIO, virtual_partitions={"max_partitions": 16}, max_messages=5)
    with running(app):
        assert record.wait_for(lambda counts: sum(counts) >= total, timeout=60)
    assert len(seen) == total
    assert_in_order(first_processing_order(seen), keys, sequences)
    assert running_now["most"] >= 8, f"at most {running_now['most']} lanes ran at once"


def test_an_async_lane_that_blocks_the_loop_is_named(kafka_bootstrap: str, new_topic) -> None:
    """A blocking call in an async lane stalls every other lane: event_loop.blocked names it
    (its topic, partition and lane), with how long it held the loop."""
    topic = new_topic(partitions=1)
    produce_keyed(kafka_bootstrap, topic, keys=1, sequences=1)
    blocked: list[dict[str, Any]] = []
    told = threading.Event()

    class Blocking(Consumer):
        async def consume(self) -> None:
            time.sleep(0.5)  # the mistake this reports: a blocking call on the shared loop

    app = make_app(kafka_bootstrap, event_loop_blocked_after=0.1)
    app.monitor.subscribe(
        "event_loop.blocked", lambda event: (blocked.append(dict(event)), told.set())
    )
    app.routes.topic(topic, Blocking, virtual_partitions={"max_partitions": 4})
    with running(app):
        assert told.wait(60), "the blocked loop was not reported"
    assert str(blocked[0]["task"]).startswith(f"{topic}/0 lane ")
    assert blocked[0]["seconds"] > 0.1


def test_a_poison_message_goes_to_the_dead_letter_queue_per_message(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic, dlq = new_topic(partitions=1), new_topic(partitions=1)
    keys, sequences = 20, 20
    total = produce_keyed(kafka_bootstrap, topic, keys=keys, sequences=sequences)
    seen: list[tuple[str, int]] = []
    record = Record()

    class Poisoned(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if (message.key, message.payload["seq"]) == ("k3", 7):
                    raise ValueError("k3/7 is poison")
                seen.append((message.key, message.payload["seq"]))
                self.mark_as_consumed(message)
            record.add(len(self.messages))

    app = make_app(kafka_bootstrap, concurrency=4, pause_timeout=0.2)
    app.routes.topic(
        topic,
        Poisoned,
        max_messages=5,
        virtual_partitions={"max_partitions": 4},
        dead_letter_queue={"topic": dlq, "max_retries": 2},
    )
    dispatched = Record()
    app.monitor.subscribe(
        ev.DEAD_LETTER_QUEUE_DISPATCHED, lambda event: dispatched.add(event["offset"])
    )
    with running(app):
        assert record.wait_for(lambda _: len(set(seen)) >= total - 1, timeout=60)
        assert dispatched.wait_for(lambda offsets: len(offsets) == 1, timeout=30)
    [dead] = read_messages(dlq, 1)
    assert dead.key() == b"k3"
    assert dead.offset() == 0
    assert dispatched.items == [7 * keys + 3], "the poison message, and only it"
    assert len(set(seen)) == total - 1
    order = first_processing_order(seen)
    assert order["k3"] == [s for s in range(sequences) if s != 7], "k3 goes on, in order"
    assert_in_order({k: v for k, v in order.items() if k != "k3"}, keys - 1, sequences)


def test_a_partition_assigned_straight_back_waits_for_every_old_lane(
    kafka_bootstrap: str, new_topic
) -> None:
    """An eager rebalance (a second member joins the group for another topic) revokes the
    partition while two lanes run and assigns it straight back: when one old lane ends, the
    new executor still takes no batch; only once the last old lane ended (it once started when
    any lane ended)."""
    topic, elsewhere = new_topic(partitions=1), new_topic(partitions=1)
    group = f"lanes-successor-{uuid.uuid4().hex[:8]}"
    events = Record()
    gates = {"slow": threading.Event(), "fast": threading.Event()}

    class Lanes(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                events.add(("start", id(self), message.key, message.offset))
                gates[message.key].wait(30)  # the first old batches wait for the test
                events.add(("end", id(self), message.key, message.offset))

    app = make_app(kafka_bootstrap, group=group, concurrency=4,
                   kafka={"session.timeout.ms": 6_000})  # fmt: skip
    # max_partitions=2: "slow" and "fast" fall in different lanes (checked below)
    app.routes.topic(topic, Lanes, virtual_partitions={"max_partitions": 2}, max_messages=1)
    assigned = Record()
    app.monitor.subscribe(ev.REBALANCE_PARTITIONS_ASSIGNED, lambda e: assigned.add(e["partitions"]))
    loops = Record()
    app.monitor.subscribe(ev.CONNECTION_LISTENER_FETCH_LOOP, lambda _e: loops.add(1))

    def settle() -> None:
        """Until the listener has looped 10 more times: what it fetched was handed out."""
        seen = len(loops.items)
        assert loops.wait_for(lambda items: len(items) >= seen + 10, 30)

    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        assert assigned.wait_for(lambda items: len(items) == 1, 60)
        producer.produce_sync(topic=topic, key="slow", payload=b"0")
        producer.produce_sync(topic=topic, key="fast", payload=b"1")
        assert events.wait_for(lambda items: len(items) == 2), "both lanes run at once"
        old = {e[1] for e in events.items}
        # another member joins for another topic: the eager protocol revokes and reassigns all
        other = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group,
                                          "session.timeout.ms": 6_000})  # fmt: skip
        other.subscribe([elsewhere])
        try:
            deadline = time.monotonic() + 60
            while len(assigned.items) < 2 and time.monotonic() < deadline:
                other.poll(0.2)  # the other member's own poll loop: it must poll to join
            assert len(assigned.items) >= 2, "assigned straight back"
            producer.produce_sync(topic=topic, key="fast", payload=b"2")
            settle()  # the new executor holds offsets 0-2 again (nothing was committed)
            gates["fast"].set()  # one old lane ends; the other still runs
            assert events.wait_for(
                lambda items: any(e[0] == "end" and e[2:] == ("fast", 1) for e in items), 30
            )
            settle()
            started = [e for e in events.items if e[0] == "start" and e[1] not in old]
            assert started == [], "a batch started while an old lane still ran"
            gates["slow"].set()
            assert events.wait_for(
                lambda items: any(e[1] not in old and e[3] == 2 and e[0] == "end" for e in items),
                30,
            )
        finally:
            other.close()
    last_old = max(i for i, e in enumerate(events.items) if e[1] in old and e[0] == "end")
    first_new = min(i for i, e in enumerate(events.items) if e[1] not in old)
    assert last_old < first_new, "the new lanes started only after the last old one ended"
