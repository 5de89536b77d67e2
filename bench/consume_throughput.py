"""Consume throughput: Conveyor's consumers beside a bare confluent-kafka batch-consume loop.

Variants, each on its own topic filled the same way (1 partition, then 4): the bare loop
(``consume(num_messages=500)``) with the same librdkafka settings as Conveyor's listener
(``fetch.queue.backoff.ms=10``, the like-for-like baseline and the headline), the bare loop
with librdkafka's defaults (1 s back-off: shown for reference), a Conveyor consumer that only
touches ``len(self.messages)``, and one that reads every ``payload`` (JSON) beside the bare
loop that decodes every payload with the same JSON library (orjson when installed). Every side
counts the same way (harness.RateMeter: from 10 % of the messages to the last one). Targets:
the no-op consumer at >= 0.8x of the like-for-like bare loop at 1 and 4 partitions (goal
0.9x); the JSON consumer at >= 0.85x of the decoding bare loop.
"""

from __future__ import annotations

import uuid

from baselines import bare_batch_consume, fill_topic
from conveyor import App, Consumer

try:
    from orjson import loads as bare_loads  # the JSON library Conveyor uses when installed
except ImportError:  # pragma: no cover
    from json import loads as bare_loads
from harness import Bench, Figure, RateMeter

LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


def conveyor_consume(bootstrap: str, topic: str, count: int, read_payloads: bool) -> float:
    meter = RateMeter(count)

    class Counting(Consumer):
        def consume(self) -> None:
            if read_payloads:
                for payload in self.messages.payloads:
                    del payload
            meter.add(len(self.messages))

    app = App(
        client_id="bench",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        },
        concurrency=4,
        max_messages=500,
        max_wait_time=0.5,
    )
    app.routes.topic(topic, Counting)
    app.start()
    try:
        if not meter.done.wait(180):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
    return meter.rate()


def main() -> None:
    bench = Bench(
        "consume_throughput",
        __doc__ or "",
        lambda parser: parser.add_argument("--messages", type=int, default=2_000_000),
    )
    count: int = bench.args.messages
    payload = (
        b'{"order":12345,"customer":"c-0042","items":["widget","gadget"],"total":99.5,"ok":true}'
    )
    payload += b" " * (100 - len(payload))
    for partitions in (1, 4):
        topics = {}
        for variant in ("like-for-like", "defaults", "no-op", "json", "bare-json"):
            topics[variant] = bench.create_topic(partitions=partitions)
            fill_topic(bench.bootstrap, topics[variant], count, payload, partitions=partitions)
        bench.console.print(
            f"filled 5 topics with {count:,} messages over {partitions} partition(s)"
        )
        like: list[float] = []
        defaults: list[float] = []
        noop: list[float] = []
        json_runs: list[float] = []
        bare_json: list[float] = []
        for attempt in range(1, bench.repeats + 1):
            like.append(
                bare_batch_consume(
                    bench.bootstrap, topics["like-for-like"], count, config=LIKE_FOR_LIKE
                )
            )
            noop.append(
                conveyor_consume(bench.bootstrap, topics["no-op"], count, read_payloads=False)
            )
            defaults.append(bare_batch_consume(bench.bootstrap, topics["defaults"], count))
            json_runs.append(
                conveyor_consume(bench.bootstrap, topics["json"], count, read_payloads=True)
            )
            bare_json.append(
                bare_batch_consume(
                    bench.bootstrap,
                    topics["bare-json"],
                    count,
                    config=LIKE_FOR_LIKE,
                    decode=bare_loads,
                )
            )
            bench.console.print(
                f"  {partitions}p run {attempt}/{bench.repeats}: bare like-for-like {like[-1]:,.0f}, "
                f"no-op {noop[-1]:,.0f}, bare with librdkafka defaults {defaults[-1]:,.0f}, "
                f"json {json_runs[-1]:,.0f}, bare json {bare_json[-1]:,.0f} msgs/s"
            )
        note = f"{count:,} x 100 B, {partitions} partition(s)"
        bench.record(
            Figure(
                bench.name,
                f"bare batch loop, same settings, {partitions}p (baseline)",
                "msgs/s",
                like,
                note=note,
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"no-op consumer, {partitions}p (target >= 0.8x like-for-like)",
                "msgs/s",
                noop,
                like,
                note="the bare loop with fetch.queue.backoff.ms=10, as Conveyor sets it",
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"no-op consumer vs bare loop with librdkafka defaults, {partitions}p",
                "msgs/s",
                noop,
                defaults,
                note="reference only: librdkafka's 1 s fetch.queue.backoff.ms",
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"JSON payload consumer, {partitions}p (target >= 0.85x the decoding bare loop)",
                "msgs/s",
                json_runs,
                bare_json,
                note=f"the bare loop decodes every payload with {bare_loads.__module__}.loads",
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"JSON payload consumer vs the bare loop that does not decode, {partitions}p",
                "msgs/s",
                json_runs,
                like,
                note=note,
            )
        )
    bench.report()


if __name__ == "__main__":
    main()
