"""Connector latency: 2,400 msgs/s for 20 s into the Broadcast sink with 100 WebSocket clients
(10 per key's channel, 10 keys) and into the Webhook sink (a local Starlette endpoint served
by uvicorn with httptools, as ``uvicorn[standard]`` serves in production), beside bare
confluent-kafka -> httpx and -> http.client (the standard library's, the cheapest stock
client) loops in the same run.

The producer, the clients and the endpoint each run in a process of their own, so that the
connector's process holds the connector only; the clients speak WebSocket on plain sockets
(see _ws_clients.py). Every variant, the bare loop too, first runs a 2 s warm-up at the same
rate that is not measured.

Per variant: in-connector latency, polled -> acknowledged by the sink (``app.latency``'s
``poll→end``; for the bare loop, its poll to the POST's answer), p50 / p99 / p99.9; and end
to end, produce -> received by a client, p50 / p99. Variants: lanes 1, 8 and 64 with
ordering "key", lanes 8 with ordering "none", lanes 8 with batch_interval 20 ms; the webhook
with 1, 8 and 64 lanes, a request per record, and with 8 lanes a request per lane batch.
Per-key order is checked at every WebSocket client and at the HTTP endpoint in every run
(ordering "none" may break it and says so). Targets (issue 16,
in-connector, ordering "key", no batch interval): p50 <= 1 ms, p99 <= 5 ms. The study's
connector: p50 < 1.5 ms, p99 ~10 ms, order lost.

The Broadcast app has a worker pool the size of the machine's cores (its deliver() never
blocks); the Webhook app a thread per lane (each waits on its requests; a lane POSTs the
records of different keys in its batch side by side, on the sink's pool of 16 connections).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer as BareConsumer

from conveyor import App
from conveyor.connect.sinks import Broadcast, Webhook
from harness import Bench, Figure, percentile

HERE = Path(__file__).parent
RATE = 2_400
KEYS = 10
CLIENTS_PER_KEY = 10
WARM_UP = 2.0  # seconds at RATE before every measured run, on every variant alike
ENDPOINT = """
import json, sys, time
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
samples, last, violations = [], {}, [0]
async def hook(request):
    body = json.loads(await request.body())
    now = time.time()
    for record in body if isinstance(body, list) else [body]:
        payload = record["payload"]
        samples.append((now - payload["sent"]) * 1000)
        if payload["seq"] < last.get(record["key"], -1):  # per-key order (a repeat is no violation)
            violations[0] += 1
        last[record["key"]] = payload["seq"]
    return Response(status_code=204)
async def report(request):
    text = json.dumps({"samples": samples, "violations": violations[0]})
    samples.clear(); violations[0] = 0
    return Response(text)
app = Starlette(routes=[Route("/hook", hook, methods=["POST"]), Route("/report", report)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", http="httptools")
"""


def free_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def send_steadily(bootstrap: str, topic: str, seconds: float, first: int = 0) -> int:
    """RATE msgs/s over KEYS keys for ``seconds``, from a process of its own (the connector's
    process holds the connector only), numbered from message ``first``; returns how many."""
    done = subprocess.run(
        [sys.executable, str(HERE / "_steady_producer.py"), bootstrap, topic, str(seconds),
         str(RATE), str(KEYS), str(first)],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    )  # fmt: skip
    return int(done.stdout)


def warm_up(bootstrap: str, topic: str, forget: Callable[[], object]) -> int:
    """WARM_UP seconds at the same rate (connections, lanes, caches and the broker's fetch
    sessions settle), then ``forget`` what was measured; returns how many were sent."""
    count = send_steadily(bootstrap, topic, WARM_UP)
    time.sleep(0.5)  # the last of them on their way
    forget()
    return count


def wait_assigned(app: App) -> None:
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
    return assigned  # type: ignore[return-value]


def run_broadcast(
    bench: Bench, seconds: float, lanes: int, ordering: str, interval: float
) -> dict[str, Any]:
    topic = bench.create_topic()
    sink = Broadcast(port=0, queue_size=100_000)
    # Broadcast's deliver() only queues (it never blocks): threads beyond the cores add GIL
    # hand-overs, not parallelism (a pool of 8 doubled the in-connector p99 here); lanes are
    # not threads and stay as many as asked.
    app = new_app(bench.bootstrap, os.cpu_count() or 2)
    app.routes.sink(topic, sink, lanes=lanes, ordering=ordering, batch_interval=interval)
    assigned = wait_assigned(app)
    app.latency.enable(stamp=False)
    app.start()
    try:
        if not assigned.wait(60):  # type: ignore[attr-defined]
            raise RuntimeError("no partition assigned")
        warm, measured = int(WARM_UP * RATE), int(seconds * RATE)
        clients = subprocess.Popen(
            [sys.executable, str(HERE / "_ws_clients.py"), f"ws://127.0.0.1:{sink.port}/ws",
             str(KEYS), str(bench.args.clients_per_key), str((warm + measured) // KEYS),
             str(warm // KEYS), "batch" if bench.args.batch_frames else "single"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert clients.stdout is not None
        if clients.stdout.readline().strip() != "ready":
            raise RuntimeError("the WebSocket clients did not start")
        first = warm_up(bench.bootstrap, topic, app.latency.reset)
        send_steadily(bench.bootstrap, topic, seconds, first)
        report = json.loads(clients.stdout.readline())
        clients.wait(30)
        clients.stdout.close()
        connector = app.latency.histogram(topic, "poll→end")
    finally:
        app.stop_and_wait()
    if report["errors"]:
        raise RuntimeError(f"client errors: {report['errors']}")
    return {"connector": connector, "e2e": report["samples"], "violations": report["violations"]}


def run_webhook(bench: Bench, seconds: float, lanes: int, batch: bool) -> dict[str, Any]:
    topic = bench.create_topic()
    port = free_port()
    endpoint = subprocess.Popen([sys.executable, "-c", ENDPOINT, str(port)])
    try:
        wait_http(port)
        app = new_app(bench.bootstrap, lanes)  # a thread per lane: each waits on its requests
        # The pool as it comes (16 connections): a lane POSTs its batch's keys side by side.
        app.routes.sink(topic, Webhook(f"http://127.0.0.1:{port}/hook", batch=batch), lanes=lanes)
        assigned = wait_assigned(app)
        app.latency.enable(stamp=False)
        app.start()
        try:
            if not assigned.wait(60):  # type: ignore[attr-defined]
                raise RuntimeError("no partition assigned")
            first = warm_up(bench.bootstrap, topic, lambda: collect(port, int(WARM_UP * RATE)))
            app.latency.reset()
            count = send_steadily(bench.bootstrap, topic, seconds, first)
            samples, violations = collect(port, count)
            connector = app.latency.histogram(topic, "poll→end")
        finally:
            app.stop_and_wait()
    finally:
        endpoint.terminate()
        endpoint.wait(30)
    return {"connector": connector, "e2e": samples, "violations": violations}


def httpx_poster(port: int) -> Callable[[bytes], object]:
    import httpx  # noqa: PLC0415

    client = httpx.Client()
    return lambda body: client.post(f"http://127.0.0.1:{port}/hook", content=body)


def stdlib_poster(port: int) -> Callable[[bytes], object]:
    """The standard library's keep-alive HTTP client."""
    import http.client  # noqa: PLC0415

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"content-type": "application/json"}

    def post(body: bytes) -> object:
        connection.request("POST", "/hook", body, headers)
        return connection.getresponse().read()

    return post


def run_bare(
    bench: Bench, seconds: float, poster: Callable[[int], Callable[[bytes], object]]
) -> dict[str, Any]:
    """confluent-kafka poll -> a POST per message, in order, one thread."""

    topic = bench.create_topic()
    port = free_port()
    endpoint = subprocess.Popen([sys.executable, "-c", ENDPOINT, str(port)])
    connector: list[float] = []
    try:
        wait_http(port)
        consumer = BareConsumer(
            {
                "bootstrap.servers": bench.bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "fetch.queue.backoff.ms": 10,
            }
        )
        consumer.subscribe([topic])
        stop = threading.Event()

        def loop() -> None:
            post = poster(port)
            while not stop.is_set():
                message = consumer.poll(0.1)
                if message is None or message.error() is not None:
                    continue
                polled = time.perf_counter()
                record = {"key": message.key().decode(), "payload": json.loads(message.value())}
                post(json.dumps(record).encode())
                connector.append((time.perf_counter() - polled) * 1000)

        reader = threading.Thread(target=loop, daemon=True)
        reader.start()
        first = warm_up(bench.bootstrap, topic, lambda: collect(port, int(WARM_UP * RATE)))
        connector.clear()
        count = send_steadily(bench.bootstrap, topic, seconds, first)
        samples, violations = collect(port, count)
        stop.set()
        reader.join(10)
        consumer.close()
    finally:
        endpoint.terminate()
        endpoint.wait(30)
    return {"connector": connector, "e2e": samples, "violations": violations}


def wait_http(port: int) -> None:
    import httpx  # noqa: PLC0415

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/report", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)  # the endpoint's process is starting
    raise RuntimeError("the HTTP endpoint did not start")


def collect(port: int, count: int) -> tuple[list[float], int]:
    """What the endpoint received since the last collect: each record's produce -> received
    latency (ms), and how many records came before an earlier one of their key."""
    import httpx  # noqa: PLC0415

    samples: list[float] = []
    violations = 0
    deadline = time.monotonic() + 60
    while len(samples) < count and time.monotonic() < deadline:
        report = httpx.get(f"http://127.0.0.1:{port}/report", timeout=10).json()
        samples.extend(report["samples"])
        violations += report["violations"]
        time.sleep(0.2)  # asking another process again; bounded by the deadline
    return samples, violations


def new_app(bootstrap: str, concurrency: int) -> App:
    return App(
        client_id="bench",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        },
        concurrency=concurrency,
        max_wait_time=0.5,
    )


def arguments(parser: Any) -> None:
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="length of each run at 2,400 msgs/s"
    )
    parser.add_argument(
        "--clients-per-key", type=int, default=CLIENTS_PER_KEY, help="WebSocket clients per key"
    )
    parser.add_argument(
        "--single-frames",
        dest="batch_frames",
        action="store_false",
        help="clients take one WebSocket message per record (default: batched frames)",
    )
    parser.add_argument(
        "--only", help="run only the variants whose name contains one of these (separated by |)"
    )


def main() -> None:
    bench = Bench(
        "connector_latency",
        __doc__ or "",
        arguments,
    )
    seconds: float = bench.args.seconds
    variants: dict[str, Any] = {
        "broadcast, 1 lane, key": lambda: run_broadcast(bench, seconds, 1, "key", 0.0),
        "broadcast, 8 lanes, key": lambda: run_broadcast(bench, seconds, 8, "key", 0.0),
        "broadcast, 64 lanes, key": lambda: run_broadcast(bench, seconds, 64, "key", 0.0),
        "broadcast, 8 lanes, none": lambda: run_broadcast(bench, seconds, 8, "none", 0.0),
        "broadcast, 8 lanes, key, 20 ms batches": lambda: run_broadcast(
            bench, seconds, 8, "key", 0.02
        ),
        "webhook, 1 lane, key": lambda: run_webhook(bench, seconds, 1, batch=False),
        "webhook, 8 lanes, key": lambda: run_webhook(bench, seconds, 8, batch=False),
        "webhook, 64 lanes, key": lambda: run_webhook(bench, seconds, 64, batch=False),
        "webhook, 8 lanes, key, a request per lane batch": lambda: run_webhook(
            bench, seconds, 8, batch=True
        ),
        "bare confluent-kafka -> httpx": lambda: run_bare(bench, seconds, httpx_poster),
        "bare confluent-kafka -> http.client": lambda: run_bare(bench, seconds, stdlib_poster),
    }
    if bench.args.only:
        wanted = [part.strip() for part in bench.args.only.split("|")]
        variants = {
            name: run
            for name, run in variants.items()
            if name.startswith("bare") or any(part in name for part in wanted)
        }
    figures: dict[str, dict[str, list[float]]] = {
        name: {"p50": [], "p99": [], "p999": [], "e2e50": [], "e2e99": []} for name in variants
    }
    for attempt in range(1, bench.repeats + 1):
        for name, run in variants.items():
            result = run()
            connector = result["connector"]
            if isinstance(connector, list):  # the bare loop's own samples
                p50, p99, p999 = (percentile(connector, q) for q in (0.5, 0.99, 0.999))
            else:
                p50, p99, p999 = (connector.quantile(q) * 1000 for q in (0.5, 0.99, 0.999))
            e2e = result["e2e"]
            row = figures[name]
            row["p50"].append(p50)
            row["p99"].append(p99)
            row["p999"].append(p999)
            row["e2e50"].append(percentile(e2e, 0.5))
            row["e2e99"].append(percentile(e2e, 0.99))
            if result["violations"] and "none" not in name:
                raise SystemExit(f"{name}: {result['violations']} messages out of order per key")
            bench.console.print(
                f"  {name} run {attempt}/{bench.repeats}: in-connector p50 {p50:.2f} ms, p99 "
                f"{p99:.2f} ms, p99.9 {p999:.2f} ms; end to end p50 {row['e2e50'][-1]:.2f} ms, "
                f"p99 {row['e2e99'][-1]:.2f} ms; order violations {result['violations']}",
                highlight=False,
            )
    for name, row in figures.items():
        # The baseline is the httpx loop; the webhook's like-for-like one is the loop
        # with the HTTP client the Webhook sink uses (both always run).
        bare = figures[
            "bare confluent-kafka -> http.client"
            if name.startswith("webhook")
            else "bare confluent-kafka -> httpx"
        ]
        target = " (target <= 1 ms)" if "key" in name and "20 ms" not in name else ""
        baseline = [] if name.startswith("bare") else bare["p50"]
        bench.record(
            Figure(
                bench.name,
                f"{name}: in-connector p50{target}",
                "ms",
                row["p50"],
                baseline,
                higher_is_better=False,
            )
        )
        target = " (target <= 5 ms)" if target else ""
        baseline = [] if name.startswith("bare") else bare["p99"]
        bench.record(
            Figure(
                bench.name,
                f"{name}: in-connector p99{target}",
                "ms",
                row["p99"],
                baseline,
                higher_is_better=False,
            )
        )
        bench.record(
            Figure(
                bench.name, f"{name}: in-connector p99.9", "ms", row["p999"], higher_is_better=False
            )
        )
        bench.record(
            Figure(
                bench.name, f"{name}: end to end p50", "ms", row["e2e50"], higher_is_better=False
            )
        )
        bench.record(
            Figure(
                bench.name, f"{name}: end to end p99", "ms", row["e2e99"], higher_is_better=False
            )
        )
    bench.report()


if __name__ == "__main__":
    main()
