"""Awaiting a delivery on a real broker: the loop keeps running while a thousand awaits are in
flight, a cancelled await does not cancel (nor double) its message, a burst is awaitable, and
timed-out deliveries are explained off the loop."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from conveyor import BatchDeliveryError, DeliveryError, Producer
from conveyor.driver.producers import ProducerClient
from helpers import LoopTicks


def test_a_thousand_awaits_in_flight_never_block_the_loop(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic(partitions=3)

    async def scenario(producer: Producer) -> tuple[list[int], int]:
        async with LoopTicks(0) as ticks:  # would stop counting if an await blocked the loop
            handles = [producer.produce_async(topic=topic, payload={"n": n}, key=str(n % 7))
                       for n in range(1000)]  # fmt: skip
            reports = await asyncio.gather(*handles)
        return sorted(r.offset for r in reports if r.partition == 0), ticks.count

    # The reports are held back 200 ms (linger): a loop free while they are in flight turns
    # thousands of times; an await that blocked it for its report, a handful. Without the
    # linger a fast broker acknowledges all 1,000 within a few turns either way.
    with Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 200}) as producer:
        offsets, ticks = asyncio.run(scenario(producer))
    assert offsets == list(range(len(offsets))), "partition 0's offsets, each once"
    assert ticks >= 100, f"the loop ticked only {ticks} times while 1,000 awaits were in flight"
    assert len(read_messages(topic, 1000, timeout=20)) == 1000


def test_a_cancelled_await_still_delivers_its_message_once(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()

    async def scenario(producer: Producer) -> None:
        handle = producer.produce_async(topic=topic, payload=b"cancelled await")
        waiting = asyncio.ensure_future(_wait(handle))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert waiting.cancelled()
        marker = await producer.produce_async(topic=topic, payload=b"after")
        assert marker.offset == 1, "the cancelled await's message went first, once"

    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        asyncio.run(scenario(producer))
    assert [m.value() for m in read_messages(topic, 2, timeout=10)] == [
        b"cancelled await",
        b"after",
    ]


async def _wait(handle: object) -> object:
    return await handle  # type: ignore[misc]


def test_an_awaited_burst_gives_its_reports(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()

    async def scenario(producer: Producer) -> list[int]:
        burst = producer.produce_many_async(
            [{"topic": topic, "payload": {"n": n}} for n in range(50)], reports=True
        )
        return [report.offset for report in await burst]

    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        assert asyncio.run(scenario(producer)) == list(range(50))


def test_timed_out_deliveries_are_explained_off_the_event_loop(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deliveries to a missing topic time out, each awaited on an event loop (which serves the
    producer's reports itself): every error says the topic does not exist, and the cluster was
    asked so on another thread (a metadata request there stalled the loop up to 0.3 s per
    burst, past the app's own blocked-loop threshold of 0.25 s)."""
    asked_on: list[threading.Thread] = []
    ask = ProducerClient.topic_missing

    def recording(client: ProducerClient, topic: str) -> bool:
        asked_on.append(threading.current_thread())
        return ask(client, topic)

    monkeypatch.setattr(ProducerClient, "topic_missing", recording)
    missing = f"no-such-topic-{uuid.uuid4().hex[:8]}"

    async def scenario(producer: Producer) -> tuple[threading.Thread, list[BaseException]]:
        single = [producer.produce_async(topic=missing, payload=b"x") for _ in range(5)]
        burst = producer.produce_many_async([{"topic": missing, "payload": b"y"}] * 3)
        outcomes = await asyncio.gather(*single, burst, return_exceptions=True)
        return threading.current_thread(), [o for o in outcomes if isinstance(o, BaseException)]

    with Producer({"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 1500}) as producer:
        loop_thread, failures = asyncio.run(scenario(producer))
    assert asked_on, "the cluster was asked"
    assert loop_thread not in asked_on, "never on the loop's thread"
    assert len(failures) == 6
    assert isinstance(failures[-1], BatchDeliveryError)
    errors = [*failures[:-1], *failures[-1].failures]
    assert all(isinstance(error, DeliveryError) for error in errors)
    for error in errors:
        assert f"{missing!r} does not exist" in str(error), error
        assert error.persistence == "not_persisted"
        assert "may have been written" not in str(error)
