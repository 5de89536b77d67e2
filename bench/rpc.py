"""RPC round trip: Conveyor's rpc.Client against a Conveyor server in the same process, beside
a bare confluent-kafka request-reply (a responder thread and a caller polling for its reply),
each on its own commands and results topics.

Conveyor's producer is idempotent (acks=all) by default: the bare loop also runs with
idempotent producers, and that like-for-like ratio is printed beside the plain one; and with
what every RPC does besides (a correlation id per call, its argument and result in JSON with
the library Conveyor uses), the like-for-like yardstick of a request-reply.

Targets (issue 7): p50 <= 2 ms; 100 sequential calls <= 250 ms. Issue 21: p50 <= 1.15x the
bare request-reply.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial

import orjson
from confluent_kafka import Consumer as BareConsumer
from confluent_kafka import Producer as BareProducer
from confluent_kafka import TopicPartition

from conveyor import App
from conveyor.rpc import Client, Handlers
from harness import Bench, Figure, percentile

CALLS = 100


def conveyor_round_trips(bootstrap: str, commands: str, results: str) -> list[float]:
    handlers = Handlers()
    handlers.register("echo")(lambda value: value)
    app = App(client_id="bench-rpc", kafka={"bootstrap.servers": bootstrap, "group.id": f"rpc-{uuid.uuid4().hex[:6]}"},
              max_wait_time=0.05)  # fmt: skip
    app.routes.rpc(commands, handlers, results_topic=results)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    app.start()
    try:
        assigned.wait(30)
        with Client(
            {"bootstrap.servers": bootstrap}, commands_topic=commands, results_topic=results
        ) as client:
            client.call("echo", 0, timeout=10)  # warm up: connections, metadata
            samples = []
            for index in range(CALLS):
                started = time.perf_counter()
                client.call("echo", index, timeout=10)
                samples.append((time.perf_counter() - started) * 1000)
            return samples
    finally:
        app.stop_and_wait()


def bare_round_trips(
    bootstrap: str, commands: str, results: str, idempotent: bool = False, framed: bool = False
) -> list[float]:
    """The bare request-reply. ``framed``: each request carries a random correlation id and
    its argument in JSON, and the responder decodes it and answers in JSON, with the library
    Conveyor uses (orjson), as every RPC must: the like-for-like yardstick."""
    stop = threading.Event()
    assigned = threading.Event()

    def responder() -> None:
        consumer = BareConsumer({"bootstrap.servers": bootstrap, "group.id": f"bare-{uuid.uuid4().hex[:6]}",
                                 "auto.offset.reset": "earliest", "fetch.wait.max.ms": 1})  # fmt: skip
        producer = BareProducer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": idempotent}
        )
        consumer.subscribe([commands], on_assign=lambda _c, _p: assigned.set())
        while not stop.is_set():
            for message in consumer.consume(1, 0.05):
                if message.error() is None:
                    reply = message.value()
                    if framed:
                        request = orjson.loads(reply)
                        reply = orjson.dumps({"id": request["id"], "ok": request["args"][0]})
                    producer.produce(results, reply, key=message.key())
                    producer.flush(5)
        consumer.close()

    thread = threading.Thread(target=responder, daemon=True)
    thread.start()
    producer = BareProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": idempotent}
    )
    replies = BareConsumer({"bootstrap.servers": bootstrap, "group.id": f"bare-c-{uuid.uuid4().hex[:6]}",
                            "fetch.wait.max.ms": 1})  # fmt: skip
    high = replies.get_watermark_offsets(TopicPartition(results, 0), timeout=10)[1]
    replies.assign([TopicPartition(results, 0, high)])
    if not assigned.wait(30):
        raise RuntimeError("the bare responder got no assignment")

    def call(value: int) -> None:
        if framed:
            call_id = os.urandom(16).hex()
            producer.produce(commands, orjson.dumps({"id": call_id, "args": [value]}), key=call_id)
        else:
            call_id = str(value)
            producer.produce(commands, call_id.encode(), key=call_id)
        producer.flush(5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for message in replies.consume(1, 0.05):
                if message.error() is not None:
                    continue
                if framed:
                    if orjson.loads(message.value())["id"] == call_id:
                        return
                elif message.key() == call_id.encode():
                    return
        raise RuntimeError("no bare reply")

    try:
        call(-1)  # warm up
        samples = []
        for index in range(CALLS):
            started = time.perf_counter()
            call(index)
            samples.append((time.perf_counter() - started) * 1000)
        return samples
    finally:
        stop.set()
        thread.join(5)
        replies.close()


def main() -> None:
    bench = Bench("rpc", __doc__ or "")
    variants: dict[str, Callable[[str, str, str], list[float]]] = {
        "bare": bare_round_trips,
        "bare, idempotent": partial(bare_round_trips, idempotent=True),
        "bare, ids and JSON": partial(bare_round_trips, idempotent=True, framed=True),
        "conveyor": conveyor_round_trips,
    }
    p50s: dict[str, list[float]] = {name: [] for name in variants}
    totals: dict[str, list[float]] = {name: [] for name in variants}
    for attempt in range(1, bench.repeats + 1):
        for name, run in variants.items():
            # Fresh topics for every run: a responder reading earlier runs' requests (the bare
            # one answers them all, having no deadline to check) sent replies whose keys
            # matched later calls, which made the bare loop look twice as fast after run 1.
            samples = run(bench.bootstrap, bench.create_topic(), bench.create_topic())
            p50s[name].append(statistics.median(samples))
            totals[name].append(sum(samples))
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: p50 {p50s[name][-1]:.3f} ms, p99 {percentile(samples, 0.99):.3f} ms, "
                f"{CALLS} calls {totals[name][-1]:.1f} ms"
            )
    bench.record(
        Figure(
            bench.name,
            "round trip p50 (target <= 2 ms and <= 1.15x)",
            "ms",
            p50s["conveyor"],
            p50s["bare"],
            higher_is_better=False,
        )
    )
    bench.record(
        Figure(
            bench.name,
            "round trip p50 vs idempotent bare producers (like-for-like)",
            "ms",
            p50s["conveyor"],
            p50s["bare, idempotent"],
            higher_is_better=False,
        )
    )
    bench.record(
        Figure(
            bench.name,
            "round trip p50 vs bare with ids and JSON, idempotent (like-for-like)",
            "ms",
            p50s["conveyor"],
            p50s["bare, ids and JSON"],
            higher_is_better=False,
        )
    )
    bench.record(Figure(bench.name, f"{CALLS} sequential calls (target <= 250 ms)", "ms", totals["conveyor"], totals["bare"],
                        higher_is_better=False))  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
