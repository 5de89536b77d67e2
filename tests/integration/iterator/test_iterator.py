"""The iterator reads from every start position, yields None when idle if asked, stops from
another thread, and never creates a consumer group."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime

import pytest

from conveyor import Admin, ConfigurationError, Iterator, Producer
from helpers import LoopTicks


def fill(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "payload": {"n": n}, "partition": n % partitions}
                for n in range(count)
            ]
        )


def take(iterator: Iterator, count: int) -> list[int]:
    values: list[int] = []
    for message in iterator:
        assert message is not None
        values.append(message.payload["n"])
        if len(values) >= count:
            iterator.stop()
    return values


def test_start_positions(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    fill(kafka_bootstrap, topic, 10)
    kafka = {"bootstrap.servers": kafka_bootstrap}
    with Iterator({topic: True}, kafka) as iterator:
        assert take(iterator, 10) == list(range(10))
    with Iterator({topic: {0: 7}}, kafka) as iterator:
        assert take(iterator, 3) == [7, 8, 9]
    with Iterator({topic: {0: -2}}, kafka) as iterator:
        assert take(iterator, 2) == [8, 9]
    with Iterator({topic: {0: "earliest"}}, kafka) as iterator:
        assert take(iterator, 1) == [0]
    middle = datetime.now(UTC)
    time.sleep(0.01)  # a clock step between the two halves (test set-up)
    with Producer(kafka) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in (10, 11)])
    with Iterator({topic: {0: middle}}, kafka) as iterator:
        assert take(iterator, 2) == [10, 11]
    with Iterator({topic: {0: "latest"}}, kafka, yield_nil=True, max_wait_time=0.1) as iterator:
        stream = iter(iterator)
        assert next(stream) is None, "nothing after latest yet"
        with Producer(kafka) as producer:
            producer.produce_sync(topic=topic, payload={"n": 12})
        value = next(message for message in stream if message is not None)
        assert value.payload["n"] == 12


def test_stop_from_another_thread_and_no_group(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    fill(kafka_bootstrap, topic, 4, partitions=2)
    kafka = {"bootstrap.servers": kafka_bootstrap}
    with Admin(kafka) as admin:
        groups_before = set(admin.list_consumer_groups())
    seen: list[object] = []
    # Auto-commit asked for, to be ignored: an iterator commits nothing under any group name.
    kafka_asking = {**kafka, "enable.auto.commit": True, "auto.commit.interval.ms": 100}
    all_read, stopped_at = threading.Event(), []

    def stop_when_all_read() -> None:  # from another thread, once the loop is only waiting
        all_read.wait(30)
        stopped_at.append(time.monotonic())
        iterator.stop()

    with Iterator({topic: True}, kafka_asking, yield_nil=True) as iterator:
        threading.Thread(target=stop_when_all_read, daemon=True).start()
        give_up = time.monotonic() + 60
        for message in iterator:
            seen.append(message)
            if len([m for m in seen if m is not None]) == 4:
                all_read.set()
            if time.monotonic() > give_up:  # bounded, in case stop() does not end the iteration
                break
        assert stopped_at, "the iteration ended by the other thread's stop()"
        assert time.monotonic() < give_up
        assert time.monotonic() - stopped_at[0] < 5
    assert sorted(m.payload["n"] for m in seen if m is not None) == [0, 1, 2, 3]
    with Admin(kafka) as admin:
        new_groups = set(admin.list_consumer_groups()) - groups_before
        assert not [lag for lag in admin.read_lags(sorted(new_groups)) if lag.topic == topic], (
            "no group committed offsets of the topic"
        )


def test_clear_errors(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    kafka = {"bootstrap.servers": kafka_bootstrap}
    with pytest.raises(ConfigurationError, match="does not exist"):
        Iterator({"no-such-topic-here": True}, kafka)
    with pytest.raises(ConfigurationError, match="no partition 3"):
        Iterator({topic: {3: 0}}, kafka)
    with pytest.raises(ConfigurationError, match=r"bootstrap\.servers"):
        Iterator({topic: True}, {})


def test_poll_for_a_loop_of_ones_own(kafka_bootstrap: str, new_topic) -> None:
    """``poll(timeout)``: what came, in order; an empty list once nothing more arrives."""
    topic = new_topic(partitions=1)
    fill(kafka_bootstrap, topic, 5)
    with Iterator({topic: True}, {"bootstrap.servers": kafka_bootstrap}) as iterator:
        values: list[int] = []
        deadline = time.monotonic() + 30
        while len(values) < 5 and time.monotonic() < deadline:
            values.extend(message.payload["n"] for message in iterator.poll(1.0))
        assert values == [0, 1, 2, 3, 4]
        assert iterator.poll(0.3) == []


def test_async_for_reads_without_blocking_the_loop(kafka_bootstrap: str, new_topic) -> None:
    """`async for` over an Iterator: every message in order, the loop ticking meanwhile, and
    `yield_nil` telling a caught-up reader so."""

    topic = new_topic()
    fill(kafka_bootstrap, topic, 30)

    async def scenario() -> tuple[list[int], int]:
        offsets: list[int] = []
        settings = {"bootstrap.servers": kafka_bootstrap}
        async with (
            LoopTicks() as ticks,
            Iterator({topic: True}, settings, yield_nil=True, max_wait_time=0.5) as messages,
        ):
            async for message in messages:
                if message is None:  # caught up
                    break
                offsets.append(message.offset)
        return offsets, ticks.count

    offsets, ticks = asyncio.run(scenario())
    assert offsets == list(range(30))
    assert ticks >= 10, "the loop stood still while the iterator waited"
