"""Consume throughput: Conveyor's consumers beside a bare confluent-kafka batch-consume loop.

Variants, over the same topic in the same run: the bare loop (``consume(num_messages=500)``),
a Conveyor consumer that only touches ``len(self.messages)``, and one that reads every
``payload`` (JSON). Once with 1 partition, once with 4. Target (issue 4): the no-op consumer
at >= 0.7x of the bare loop.
"""

from __future__ import annotations

import threading
import time
import uuid

from baselines import bare_batch_consume, fill_topic
from conveyor import App, Consumer
from harness import Bench, Figure


def conveyor_consume(bootstrap: str, topic: str, count: int, read_payloads: bool) -> float:
    lock = threading.Lock()
    state = {"seen": 0, "started": 0.0, "finished": 0.0}
    done = threading.Event()

    class Counting(Consumer):
        def consume(self) -> None:
            if read_payloads:
                for payload in self.messages.payloads:
                    del payload
            with lock:
                if not state["started"]:
                    state["started"] = time.perf_counter()
                state["seen"] += len(self.messages)
                if state["seen"] >= count and not done.is_set():
                    state["finished"] = time.perf_counter()
                    done.set()

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
        if not done.wait(180):
            raise RuntimeError(f"Conveyor consumed {state['seen']} of {count}")
    finally:
        app.stop_and_wait()
    return count / (state["finished"] - state["started"])


def main() -> None:
    bench = Bench(
        "consume_throughput",
        __doc__ or "",
        lambda parser: parser.add_argument("--messages", type=int, default=1_000_000),
    )
    count: int = bench.args.messages
    payload = (
        b'{"order":12345,"customer":"c-0042","items":["widget","gadget"],"total":99.5,"ok":true}'
    )
    payload += b" " * (100 - len(payload))
    for partitions in (1, 4):
        topic = bench.create_topic(partitions=partitions)
        bench.console.print(
            f"filling {topic} with {count:,} messages over {partitions} partition(s)"
        )
        fill_topic(bench.bootstrap, topic, count, payload, partitions=partitions)
        bare: list[float] = []
        tuned: list[float] = []
        noop: list[float] = []
        json_runs: list[float] = []
        for attempt in range(1, bench.repeats + 1):
            bare.append(bare_batch_consume(bench.bootstrap, topic, count))
            tuned.append(
                bare_batch_consume(
                    bench.bootstrap, topic, count, config={"fetch.queue.backoff.ms": 10}
                )
            )
            noop.append(conveyor_consume(bench.bootstrap, topic, count, read_payloads=False))
            json_runs.append(conveyor_consume(bench.bootstrap, topic, count, read_payloads=True))
            bench.console.print(
                f"  {partitions}p run {attempt}/{bench.repeats}: bare {bare[-1]:,.0f}, bare with Conveyor's "
                f"fetch.queue.backoff.ms {tuned[-1]:,.0f}, no-op {noop[-1]:,.0f}, "
                f"json {json_runs[-1]:,.0f} msgs/s"
            )
        note = f"{count:,} x 100 B, {partitions} partition(s)"
        bench.record(
            Figure(
                bench.name, f"bare batch loop, {partitions}p (baseline)", "msgs/s", bare, note=note
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"no-op consumer, {partitions}p (target >= 0.7x)",
                "msgs/s",
                noop,
                bare,
                note=note,
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"no-op consumer vs bare loop with fetch.queue.backoff.ms=10, {partitions}p",
                "msgs/s",
                noop,
                tuned,
                note="like-for-like librdkafka setting",
            )
        )
        bench.record(
            Figure(
                bench.name,
                f"JSON payload consumer, {partitions}p",
                "msgs/s",
                json_runs,
                bare,
                note=note,
            )
        )
    bench.report()


if __name__ == "__main__":
    main()
