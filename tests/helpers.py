"""Small helpers shared by the integration tests (importable: pytest puts tests/ on the path)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Message, TopicPartition

from conveyor import App


class Record:
    """What consumers saw, shared across worker threads; waiters wake on every change."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.items: list[Any] = []

    def add(self, *items: Any) -> None:
        with self.changed:
            self.items.extend(items)
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = 60) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self.items), timeout)


def conveyor_cli(*args: str | Path | int) -> subprocess.CompletedProcess[str]:
    """Run ``conveyor ARGS`` as a user would (wide tables, no stdin); its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "conveyor", *map(str, args)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, check=False,
        env=dict(os.environ, COLUMNS="200"),
    )  # fmt: skip


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` of 127.0.0.1."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(offsets: list[int]) -> int:
    """A port ``base`` for which ``base + offset`` is free for every offset (a broker of the
    test's own and its other listeners)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = int(sock.getsockname()[1])
        if base + max(offsets) < 65535 and all(port_free(base + n) for n in offsets):
            return base
    raise RuntimeError(f"no free ports at offsets {offsets}")


@contextmanager
def running(app: App) -> Iterator[App]:
    """Start ``app`` for the block; stop it gracefully after."""
    app.start()
    try:
        yield app
    finally:
        app.stop_and_wait()


class FakeRaw:
    """A stand-in for confluent-kafka's consumed message (pure-logic tests need no broker)."""

    def __init__(
        self,
        offset: int,
        headers: list[tuple[str, Any]] | None = None,
        timestamp: tuple[int, int] = (0, 0),
        key: bytes | None = None,
        topic: str = "orders",
        partition: int = 0,
    ) -> None:
        self._offset, self._headers, self._timestamp = offset, headers, timestamp
        self._key, self._topic, self._partition = key, topic, partition

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, Any]] | None:
        return None if self._headers is None else list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def key(self) -> bytes | None:
        return self._key

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition


class LoopTicks:
    """Counts the turns of the running event loop while a test awaits something: a count
    that stays low says an await blocked the loop. ``async with LoopTicks() as ticks:``,
    then ``ticks.count``; ``period`` 0 yields at every turn."""

    def __init__(self, period: float = 0.001) -> None:
        self.period = period
        self.count = 0
        self._task: Any = None

    async def _tick(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(self.period)

    async def __aenter__(self) -> LoopTicks:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._task.cancel()


def read_topic(
    bootstrap: str, topic: str, count: int, timeout: float = 30.0, **config: str
) -> list[Message]:
    """Read ``count`` messages of ``topic`` on the broker at ``bootstrap`` from the beginning of
    every partition, without a consumer group (bounded by ``timeout`` seconds), in partition
    order, each partition in offset order (the ``read_messages`` fixture, for any broker)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            **config,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        received: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(received) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    received.append(message)
        return sorted(received, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()
