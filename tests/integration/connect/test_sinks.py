"""Sinks against the real broker and real endpoints: JSON-lines files with 64 lanes keep every
key's order; a webhook (a local Starlette app under uvicorn) gets every record in order per
key, 5xx answers retried, 4xx answers sent to the dead letter queue with the reason."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conveyor import App, Producer
from conveyor.connect.sinks import JsonLines, Webhook
from helpers import Record, running


def make_app(bootstrap: str, **settings: Any) -> App:
    kafka = {
        "bootstrap.servers": bootstrap,
        "group.id": f"test-{uuid.uuid4().hex[:8]}",
        "auto.commit.interval.ms": 200,
    }
    return App(client_id="test", kafka=kafka, max_wait_time=0.2, **settings)


def produce_keyed(bootstrap: str, topic: str, keys: int, sequences: int, **extra: Any) -> int:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "key": f"k{key}", "payload": {"seq": seq, **extra}}
                for seq in range(sequences)
                for key in range(keys)
            ]
        )
    return keys * sequences


def in_order(pairs: list[tuple[str, int]], keys: int, sequences: int) -> None:
    """Per key, the sequence numbers in order of first delivery are 0 .. sequences-1."""
    first: dict[str, list[int]] = {}
    done: set[tuple[str, int]] = set()
    for key, seq in pairs:
        if (key, seq) not in done:
            done.add((key, seq))
            first.setdefault(key, []).append(seq)
    assert len(first) == keys
    for key, seqs in first.items():
        assert seqs == list(range(sequences)), f"{key}: {seqs[:20]}"


def test_json_lines_with_64_lanes_keep_every_keys_order(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    keys, sequences = 1_000, 20
    total = produce_keyed(kafka_bootstrap, topic, keys, sequences)
    sink = JsonLines(tmp_path, max_bytes=256 * 1024)
    app = make_app(kafka_bootstrap, concurrency=8)
    app.routes.sink(topic, sink, lanes=64, max_batch=50)
    done = Record()
    app.monitor.subscribe("consumer.consumed", lambda event: done.add(event["count"]))
    with running(app):
        assert done.wait_for(lambda counts: sum(counts) >= total, timeout=120)
    files = sorted(tmp_path.glob("*.jsonl"), key=lambda path: int(path.stem.rsplit("-", 1)[1]))
    assert len(files) > 1, "rotated by size"
    lines = [json.loads(line) for path in files for line in path.read_text().splitlines()]
    assert sorted(line["offset"] for line in lines) == list(range(total)), "each record once"
    # files in the order they were written, lines in the order they were appended: the
    # order of delivery, in which each key's sequence numbers must grow
    in_order([(line["key"], line["payload"]["seq"]) for line in lines], keys, sequences)


def test_a_webhook_that_always_answers_4xx_sends_every_record_to_the_dead_letter_queue(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic, dlq = new_topic(partitions=2), new_topic(partitions=1)
    keys, sequences = 5, 4
    total = produce_keyed(kafka_bootstrap, topic, keys, sequences)
    everything = {(f"k{key}", seq) for key in range(keys) for seq in range(sequences)}
    app = make_app(kafka_bootstrap, concurrency=4)
    consumed = Record()
    app.monitor.subscribe("consumer.consumed", lambda event: consumed.add(event["count"]))
    with Endpoint(fail_first=set(), reject=everything) as endpoint:
        app.routes.sink(topic, Webhook(endpoint.url), lanes=4, dead_letter_queue=dlq)
        with running(app):
            dead = read_messages(dlq, total)
            assert consumed.wait_for(lambda counts: sum(counts) >= total, timeout=30)
    assert endpoint.received == []
    assert len(dead) == total
    assert {(m.key().decode(), json.loads(m.value())["seq"]) for m in dead} == everything
    for message in dead:
        assert dict(message.headers() or [])["original_error_message"].startswith(b"HTTP 422")


class Endpoint:
    """A Starlette app under uvicorn on a free loopback port, recording what it received."""

    def __init__(self, fail_first: set[tuple[str, int]], reject: set[tuple[str, int]]) -> None:
        self.received: list[tuple[str, int]] = []
        self.fail_first = set(fail_first)
        self.reject = reject
        self.changed = threading.Condition()

        async def receive(request: Request) -> JSONResponse:
            body = await request.json()
            pair = (body["key"], body["payload"]["seq"])
            if pair in self.fail_first:
                self.fail_first.discard(pair)
                return JSONResponse({"error": "try later"}, status_code=503)
            if pair in self.reject:
                return JSONResponse({"error": "no such customer"}, status_code=422)
            with self.changed:
                self.received.append(pair)
                self.changed.notify_all()
            return JSONResponse({"ok": True})

        # listening before uvicorn serves: requests wait in the backlog, no start-up to poll
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        config = uvicorn.Config(
            Starlette(routes=[Route("/hook", receive, methods=["POST"])]),
            log_level="warning", lifespan="off",
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, args=([self.listener],), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.listener.close()

    def wait_for(self, count: int, timeout: float = 60) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(set(self.received)) >= count, timeout)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with Endpoint(fail_first={("k1", 3), ("k5", 0)}, reject={("k2", 4)}) as server:
        yield server


@pytest.mark.parametrize("lanes", [1, 4])  # 1: all ten keys POSTed side by side in one lane
def test_a_webhook_gets_every_record_in_order_retries_5xx_and_dead_letters_4xx(
    kafka_bootstrap: str, new_topic, endpoint: Endpoint, read_messages, lanes: int
) -> None:
    topic, dlq = new_topic(partitions=2), new_topic(partitions=1)
    keys, sequences = 10, 10
    total = produce_keyed(kafka_bootstrap, topic, keys, sequences)
    app = make_app(kafka_bootstrap, concurrency=8, pause_timeout=0.2)
    app.routes.sink(
        topic, Webhook(endpoint.url, concurrency=8), lanes=lanes, dead_letter_queue=dlq, retries=5
    )
    with running(app):
        assert endpoint.wait_for(total - 1), f"{len(set(endpoint.received))} of {total - 1}"
        [dead] = read_messages(dlq, 1)
    assert ("k2", 4) not in endpoint.received
    in_order([pair for pair in endpoint.received if pair[0] != "k2"], keys - 1, sequences)
    assert [seq for key, seq in endpoint.received if key == "k2"] == [
        s for s in range(sequences) if s != 4
    ]
    headers = {name: value for name, value in dead.headers()}
    assert dead.key() == b"k2"
    assert headers["original_error_message"].startswith(b"HTTP 422")


def rss_bytes() -> int:
    """This process's resident memory now (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Outage:
    """A sink down for ``seconds`` after its first call (it raises), then delivering."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.down_since: float | None = None
        self.down = threading.Event()
        self.delivered = Record()

    def open(self) -> None: ...

    def deliver(self, records: Any) -> None:
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            self.down.set()
        if now - self.down_since < self.seconds:
            raise ConnectionError("the sink is down")
        self.delivered.add(*(record.offset for record in records))

    def flush(self) -> None: ...

    def close(self) -> None: ...


def test_a_failing_sink_pauses_its_partition_and_memory_stays_flat(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    total = 200_000
    pad = "x" * 200
    with Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20}) as producer:
        for first in range(0, total, 20_000):
            producer.produce_many_sync(
                [{"topic": topic, "key": f"k{n % 100}", "payload": {"n": n, "pad": pad}}
                 for n in range(first, first + 20_000)]
            )  # fmt: skip
    sink = Outage(seconds=10)
    app = make_app(kafka_bootstrap, concurrency=4, pause_timeout=0.5, pause_max_timeout=2)
    app.routes.sink(topic, sink, lanes=4)
    paused = Record()
    with running(app):
        assert sink.down.wait(30), "the first delivery attempt starts the outage"
        assert sink.down_since is not None
        time.sleep(3)  # librdkafka's prefetch and the partition's bound fill, then hold
        early = rss_bytes()
        while time.monotonic() - sink.down_since < 9.5:
            [state] = app.snapshot().partitions
            paused.add((state.paused, state.pending))
            time.sleep(0.5)
        late = rss_bytes()
        assert sink.delivered.wait_for(lambda offsets: len(set(offsets)) >= total, timeout=120)
    assert all(flag for flag, _ in paused.items), "paused for the whole outage"
    assert max(pending for _, pending in paused.items) <= 20_000, "fetched messages are bounded"
    growth = (late - early) / 2**20
    print(f"RSS {early / 2**20:.0f} MB after 3 s of the outage, {late / 2**20:.0f} MB at its end")
    assert growth < 20, f"memory grew {growth:.0f} MB during the outage"
    assert sorted(set(sink.delivered.items)) == list(range(total)), "then everything, once resumed"


def test_an_async_sink_opens_delivers_and_closes_on_the_event_loop(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    total = produce_keyed(kafka_bootstrap, topic, keys=20, sequences=10)
    calls: list[str] = []
    delivered: list[tuple[str, int]] = []
    loops: set[int] = set()
    done = Record()

    class AsyncCollecting:
        async def open(self) -> None:
            loops.add(id(asyncio.get_running_loop()))
            calls.append("open")

        async def deliver(self, records: Any) -> None:
            loops.add(id(asyncio.get_running_loop()))
            await asyncio.sleep(0.001)
            delivered.extend((record.key, record.payload["seq"]) for record in records)
            done.add(len(records))

        async def flush(self) -> None:
            calls.append("flush")

        async def close(self) -> None:
            loops.add(id(asyncio.get_running_loop()))
            calls.append("close")

    app = make_app(kafka_bootstrap, concurrency=1)
    app.routes.sink(topic, AsyncCollecting(), lanes=8)
    with running(app):
        assert done.wait_for(lambda counts: sum(counts) >= total, timeout=60)
    assert calls == ["open", "flush", "close"]
    assert len(loops) == 1, "open, deliver and close ran on one loop"
    in_order(delivered, 20, 10)


class Opening:
    """An async sink that records its life and, with ``fail``, cannot open."""

    def __init__(self, name: str, life: list[str], fail: bool = False) -> None:
        self.name, self.life, self.fail = name, life, fail

    async def open(self) -> None:
        self.life.append(f"{self.name} open")
        if self.fail:
            raise OSError(f"{self.name}: no route to the sink")

    async def deliver(self, records: Any) -> None:
        self.life.append(f"{self.name} deliver")

    async def flush(self) -> None:
        self.life.append(f"{self.name} flush")

    async def close(self) -> None:
        self.life.append(f"{self.name} close")


def test_an_async_sink_is_open_when_start_returns_and_one_that_cannot_open_fails_the_start(
    kafka_bootstrap: str, new_topic
) -> None:
    first, second = new_topic(partitions=1), new_topic(partitions=1)
    life: list[str] = []
    app = make_app(kafka_bootstrap)
    app.routes.sink(first, Opening("a", life))
    app.start()
    try:
        assert life == ["a open"], "open before anything is consumed (a server must listen)"
    finally:
        app.stop_and_wait()
    assert life == ["a open", "a flush", "a close"]

    life.clear()
    failing = make_app(kafka_bootstrap)
    failing.routes.sink(first, Opening("a", life))
    failing.routes.sink(second, Opening("b", life, fail=True))
    with pytest.raises(OSError, match="b: no route to the sink"):
        failing.start()
    assert life == ["a open", "b open", "a flush", "a close"], "the one opened is closed"
    assert failing.state == "idle"


def test_a_sink_route_records_each_records_stages(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    """Produced -> polled -> handed to the sink -> acknowledged by it, per record, under the
    sink route's topic in ``app.latency`` (see conveyor.tracing.latency for the stages)."""
    topic = new_topic(partitions=1)
    records = 20
    app = make_app(kafka_bootstrap, concurrency=2)
    app.routes.sink(topic, JsonLines(tmp_path), lanes=2)
    app.latency.enable()
    consumed = Record()
    app.monitor.subscribe("consumer.consumed", lambda event: consumed.add(event["count"]))
    with running(app):
        for seq in range(records):
            app.producer.produce_sync(topic=topic, key=f"k{seq % 2}", payload={"seq": seq})
        assert consumed.wait_for(lambda counts: sum(counts) >= records, timeout=30)
    counts = {
        stage: app.latency.histogram(topic, stage).count
        for stage in ("append→poll", "poll→start", "start→end", "produce→end", "poll→end")
    }
    assert counts == dict.fromkeys(counts, records)
    assert len(lines_of(tmp_path)) == records
    # the parts add up: polled -> acknowledged is polled -> handed plus handed -> acknowledged
    poll_end = app.latency.histogram(topic, "poll→end").total
    parts = sum(app.latency.histogram(topic, stage).total for stage in ("poll→start", "start→end"))
    assert poll_end == pytest.approx(parts, rel=0.01)


def lines_of(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


class Calls:
    """A sink that records each ``deliver`` call: when (monotonic) and which offsets."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, list[int]]] = []
        self.changed = threading.Condition()

    def open(self) -> None: ...

    def deliver(self, records: Any) -> None:
        with self.changed:
            self.calls.append((time.monotonic(), [record.offset for record in records]))
            self.changed.notify_all()

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def wait_for(self, offsets: int, timeout: float = 60) -> list[tuple[float, list[int]]]:
        with self.changed:
            assert self.changed.wait_for(
                lambda: sum(len(o) for _, o in self.calls) >= offsets, timeout
            ), self.calls
            return list(self.calls)


def test_a_batch_interval_gathers_records_into_one_write_and_a_lone_one_still_goes(
    kafka_bootstrap: str, new_topic
) -> None:
    """``batch_interval=3``: five records produced one by one (each acknowledged before the
    next, so a fetch may bring them one at a time) reach the sink in one ``deliver`` call;
    a record produced alone after them is written on its own once the interval has passed
    (no sooner, and not lost)."""
    topic = new_topic(partitions=1)
    interval = 3.0
    sink = Calls()
    app = make_app(kafka_bootstrap, concurrency=2)
    app.routes.sink(topic, sink, batch_interval=interval, lanes=2)
    with running(app):
        for seq in range(5):
            app.producer.produce_sync(topic=topic, key="k", payload={"seq": seq})
        assert sink.wait_for(5) == [(sink.calls[0][0], [0, 1, 2, 3, 4])], "one write"
        produced = time.monotonic()
        app.producer.produce_sync(topic=topic, key="k", payload={"seq": 5})
        calls = sink.wait_for(6)
    assert [offsets for _, offsets in calls] == [[0, 1, 2, 3, 4], [5]]
    assert calls[1][0] - produced >= interval, "held for the interval, then written"
