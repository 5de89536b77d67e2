"""Awaiting a delivery on a real broker: the loop keeps running while a thousand awaits are in
flight, a cancelled await does not cancel (nor double) its message, and a burst is awaitable."""

from __future__ import annotations

import asyncio

from conveyor import Producer
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

    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
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
