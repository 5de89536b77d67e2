"""RPC round trip: Conveyor's rpc.Client against a Conveyor server, beside a bare
confluent-kafka request-reply (a responder thread and a caller polling for its reply), each
on its own commands and results topics.

Conveyor's producer is idempotent (acks=all) by default: the bare loop also runs with
idempotent producers, and that like-for-like ratio is printed beside the plain one; and with
what every RPC does besides (a correlation id per call, its argument and result in JSON with
the library Conveyor uses), the like-for-like yardstick of a request-reply.

Two layouts: caller and server in one process (the figures the targets were first set on),
and the server in a process of its own, as callers and servers are deployed (both sides'
Python then stops competing for one interpreter). Each side warms up with the same calls.

Each run also takes the process's CPU time over its 100 measured calls
(``time.process_time()``: every thread of the process, librdkafka's included), so in the
one-process layout it is what a call costs caller and server together; with the server apart,
the caller's share alone.

Targets: p50 <= 2 ms; 100 sequential calls <= 250 ms; p50 <= 1.15x the bare request-reply.
The seed (Karafka's RPC proof of concept) gives about 3 ms a round trip in local testing, and
no CPU figure.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import Consumer as BareConsumer
from confluent_kafka import Producer as BareProducer
from confluent_kafka import TopicPartition

from conveyor import App
from conveyor.rpc import Client, Handlers
from harness import Bench, Figure, percentile

CALLS = 100
WARM_UP = 10
SEED = "the seed: about 3 ms a round trip (300 ms per 100 calls); no CPU figure"

Samples = tuple[list[float], float]  # round trips in ms, and the process's CPU ms over them

Stop = Callable[[], None]


# -- servers: start one, get the function that stops it ----------------------------------------


def conveyor_server(bootstrap: str, commands: str, results: str) -> Stop:
    handlers = Handlers()
    handlers.register("echo")(lambda value: value)
    app = App(client_id="bench-rpc", kafka={"bootstrap.servers": bootstrap, "group.id": f"rpc-{uuid.uuid4().hex[:6]}"},
              max_wait_time=0.05)  # fmt: skip
    app.routes.rpc(commands, handlers, results_topic=results)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    app.start()
    if not assigned.wait(30):
        app.stop_and_wait()
        raise RuntimeError("the Conveyor server got no assignment")
    return app.stop_and_wait


def bare_server(
    bootstrap: str, commands: str, results: str, idempotent: bool = False, framed: bool = False
) -> Stop:
    """The bare responder. ``framed``: it decodes each request's JSON and answers in JSON with
    the request's correlation id, with the library Conveyor uses (orjson), as every RPC must."""
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
    if not assigned.wait(30):
        raise RuntimeError("the bare responder got no assignment")

    def stopper() -> None:
        stop.set()
        thread.join(5)

    return stopper


# -- callers: the round trips in milliseconds, after the warm-up --------------------------------


def conveyor_calls(bootstrap: str, commands: str, results: str) -> Samples:
    with Client(
        {"bootstrap.servers": bootstrap}, commands_topic=commands, results_topic=results
    ) as client:
        for index in range(WARM_UP):  # connections, metadata
            client.call("echo", index, timeout=10)
        samples = []
        cpu = time.process_time()
        for index in range(CALLS):
            started = time.perf_counter()
            client.call("echo", index, timeout=10)
            samples.append((time.perf_counter() - started) * 1000)
        return samples, (time.process_time() - cpu) * 1000


def bare_calls(
    bootstrap: str, commands: str, results: str, idempotent: bool = False, framed: bool = False
) -> Samples:
    """The bare caller. ``framed``: a random correlation id per call, the argument in JSON,
    and the reply found by decoding each one (see :func:`bare_server`)."""
    producer = BareProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": idempotent}
    )
    replies = BareConsumer({"bootstrap.servers": bootstrap, "group.id": f"bare-c-{uuid.uuid4().hex[:6]}",
                            "fetch.wait.max.ms": 1})  # fmt: skip
    high = replies.get_watermark_offsets(TopicPartition(results, 0), timeout=10)[1]
    replies.assign([TopicPartition(results, 0, high)])

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
        for index in range(WARM_UP):
            call(-1 - index)
        samples = []
        cpu = time.process_time()
        for index in range(CALLS):
            started = time.perf_counter()
            call(index)
            samples.append((time.perf_counter() - started) * 1000)
        return samples, (time.process_time() - cpu) * 1000
    finally:
        replies.close()


# -- layouts ------------------------------------------------------------------------------------


class Variant:
    """A server and a caller, in one process or the server in its own."""

    def __init__(
        self,
        server: str,
        caller: Callable[..., Samples],
        own_process: bool = False,
        **options: Any,
    ) -> None:
        self.server = server
        self.caller = caller
        self.own_process = own_process
        self.options = options

    def run(self, bootstrap: str, commands: str, results: str) -> Samples:
        if not self.own_process:
            stop = start_server(self.server, bootstrap, commands, results, self.options)
            try:
                return self.caller(bootstrap, commands, results, **self.options)
            finally:
                stop()
        context = multiprocessing.get_context("spawn")
        ready, done = context.Event(), context.Event()
        process = context.Process(
            target=serve_in_own_process,
            args=(self.server, bootstrap, commands, results, self.options, ready, done),
            daemon=True,
        )
        process.start()
        try:
            if not ready.wait(60):
                raise RuntimeError(f"the {self.server} server did not start")
            return self.caller(bootstrap, commands, results, **self.options)
        finally:
            done.set()
            process.join(30)


def start_server(
    kind: str, bootstrap: str, commands: str, results: str, options: dict[str, Any]
) -> Stop:
    if kind == "conveyor":
        return conveyor_server(bootstrap, commands, results)
    return bare_server(bootstrap, commands, results, **options)


def serve_in_own_process(
    kind: str,
    bootstrap: str,
    commands: str,
    results: str,
    options: dict[str, Any],
    ready: Any,
    done: Any,
) -> None:
    stop = start_server(kind, bootstrap, commands, results, options)
    ready.set()
    done.wait(600)
    stop()


def main() -> None:
    bench = Bench("rpc", __doc__ or "")
    framed = {"idempotent": True, "framed": True}
    variants = {
        "bare": Variant("bare", bare_calls),
        "bare, idempotent": Variant("bare", bare_calls, idempotent=True),
        "bare, ids and JSON": Variant("bare", bare_calls, **framed),
        "conveyor": Variant("conveyor", conveyor_calls),
        "bare, ids and JSON, server apart": Variant("bare", bare_calls, True, **framed),
        "conveyor, server apart": Variant("conveyor", conveyor_calls, True),
    }
    p50s: dict[str, list[float]] = {name: [] for name in variants}
    totals: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    for attempt in range(1, bench.repeats + 1):
        for name, variant in variants.items():
            # Fresh topics for every run: a responder reading earlier runs' requests (the bare
            # one answers them all, having no deadline to check) sent replies whose keys
            # matched later calls, which made the bare loop look twice as fast after run 1.
            samples, cpu = variant.run(bench.bootstrap, bench.create_topic(), bench.create_topic())
            p50s[name].append(statistics.median(samples))
            totals[name].append(sum(samples))
            cpus[name].append(cpu)
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: p50 {p50s[name][-1]:.3f} ms, p99 {percentile(samples, 0.99):.3f} ms, "
                f"{CALLS} calls {totals[name][-1]:.1f} ms, CPU {cpu:.1f} ms"
            )

    def p50(label: str, name: str, baseline: str) -> None:
        bench.record(
            Figure(bench.name, label, "ms", p50s[name], p50s[baseline], higher_is_better=False)
        )

    p50("round trip p50 (target <= 2 ms and <= 1.15x)", "conveyor", "bare")
    p50("round trip p50 vs idempotent bare producers", "conveyor", "bare, idempotent")
    p50(
        "round trip p50 vs bare with ids and JSON (like-for-like)", "conveyor", "bare, ids and JSON"
    )
    p50(
        "server in its own process: p50 vs bare with ids and JSON",
        "conveyor, server apart",
        "bare, ids and JSON, server apart",
    )
    bench.record(Figure(bench.name, f"{CALLS} sequential calls (target <= 250 ms)", "ms", totals["conveyor"], totals["bare"],
                        higher_is_better=False, note=SEED))  # fmt: skip
    bench.record(Figure(bench.name, f"CPU per {CALLS} calls, caller and server in one process", "ms",
                        cpus["conveyor"], cpus["bare, ids and JSON"], higher_is_better=False,
                        note=f"beside the bare request-reply with ids and JSON; {SEED}"))  # fmt: skip
    bench.record(Figure(bench.name, f"CPU per {CALLS} calls, the caller alone (server apart)", "ms",
                        cpus["conveyor, server apart"], cpus["bare, ids and JSON, server apart"],
                        higher_is_better=False, note=SEED))  # fmt: skip
    bench.report()


if __name__ == "__main__":
    main()
