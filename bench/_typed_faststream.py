"""The FastStream side of ``typed_consume``: a subscriber whose handler takes the pydantic
``Order`` (FastStream validates each message's JSON into it), counting every message; prints
its rate as one JSON line. Runs in the peers' environment (``_peers.py``): no Conveyor here."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import pydantic


class Order(pydantic.BaseModel):
    order: int
    customer: str
    items: list[str]
    total: float
    ok: bool


class Meter:
    """Messages per second from 10 % of ``count`` to the last (as the harness's RateMeter)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.threshold = max(1, count // 10)
        self.seen = 0
        self.start: tuple[float, int] | None = None
        self.end: tuple[float, int] | None = None
        self.done = asyncio.Event()

    def add(self, messages: int) -> None:
        self.seen += messages
        if self.start is None and self.seen >= self.threshold:
            self.start = (time.perf_counter(), self.seen)
        if self.end is None and self.seen >= self.count:
            self.end = (time.perf_counter(), self.seen)
            self.done.set()

    def rate(self) -> float:
        assert self.start is not None
        assert self.end is not None
        return (self.end[1] - self.start[1]) / (self.end[0] - self.start[0])


async def main(args: argparse.Namespace) -> float:
    from faststream.kafka import KafkaBroker  # noqa: PLC0415 - the peers' environment only

    meter = Meter(args.count)
    broker = KafkaBroker(args.bootstrap, logger=None)

    if args.batch:

        @broker.subscriber(args.topic, group_id=args.group, auto_offset_reset="earliest",
                           batch=True, max_records=500)  # fmt: skip
        async def handle_batch(orders: list[Order]) -> None:
            meter.add(len(orders))

    else:

        @broker.subscriber(args.topic, group_id=args.group, auto_offset_reset="earliest")
        async def handle(order: Order) -> None:
            meter.add(1)

    async with broker:
        await broker.start()
        await asyncio.wait_for(meter.done.wait(), timeout=600)
    return meter.rate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--batch", action="store_true")
    arguments = parser.parse_args()
    print(json.dumps({"rate": asyncio.run(main(arguments))}), flush=True)
