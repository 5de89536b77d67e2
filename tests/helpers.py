"""Small helpers shared by the integration tests (importable: pytest puts tests/ on the path)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from conveyor import Admin, App


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


def conveyor_argv(*args: str | Path | int) -> list[str]:
    """The command line of ``conveyor ARGS`` run by this interpreter (for a subprocess)."""
    return [sys.executable, "-m", "conveyor", *map(str, args)]


class ServerProcess:
    """A long-running command (``conveyor server``, ``conveyor swarm``, a script that runs an
    app) as a subprocess whose output lines are collected as they come.

    Each line of the streams named in ``read`` (``stdout``, ``stderr`` or both), stripped, is
    put in ``lines`` by a thread of its own; ``<eof>`` is the last line once every stream read
    has ended. ``wait_for`` and ``wait_until`` wake on each line (``wait`` seconds at most
    unless told). A stream not read is ``stderr`` (the process's stderr: quiet by default, a
    file, ``subprocess.STDOUT`` or ``subprocess.PIPE`` to read at the end) or quiet. A
    subclass reads each line as it comes in ``heard``."""

    EOF = "<eof>"

    def __init__(
        self,
        command: Sequence[str | Path],
        *,
        env: dict[str, str],
        cwd: Path,
        read: Sequence[str] = ("stdout",),
        stderr: int | IO[Any] = subprocess.DEVNULL,
        wait: float = 60,
    ) -> None:
        self.wait = wait
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            [str(part) for part in command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if "stdout" in read else subprocess.DEVNULL,
            stderr=subprocess.PIPE if "stderr" in read else stderr,
            text=True,
            env=env,
            cwd=cwd,
        )
        self._reading: list[IO[str]] = [
            stream
            for name, stream in (("stdout", self.process.stdout), ("stderr", self.process.stderr))
            if name in read and stream is not None
        ]
        self.readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in self._reading
        ]
        for reader in self.readers:
            reader.start()

    def heard(self, line: str) -> None:
        """Called with each line as it comes (holding ``changed``): for a subclass to read."""

    def _read(self, stream: IO[str]) -> None:
        for raw in stream:
            line = raw.strip()
            with self.changed:
                self.lines.append(line)
                self.heard(line)
                self.changed.notify_all()
        stream.close()
        with self.changed:
            self._reading.remove(stream)
            if not self._reading:
                self.lines.append(self.EOF)
            self.changed.notify_all()

    def wait_for(
        self, predicate: Callable[[list[str]], bool], timeout: float | None = None
    ) -> bool:
        """Block (woken by each new line) until ``predicate(lines)`` holds."""
        with self.changed:
            return self.changed.wait_for(
                lambda: predicate(self.lines), self.wait if timeout is None else timeout
            )

    def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block (woken by each new line) until ``predicate()`` holds."""
        with self.changed:
            return self.changed.wait_for(predicate, self.wait if timeout is None else timeout)

    def join(self, timeout: float = 10) -> None:
        """Wait for the readers to see the end of their streams."""
        for reader in self.readers:
            reader.join(timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60, join: float = 10) -> int:
        """Send ``sig``; the exit code once the process and its output have ended."""
        self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self.join(join)
        return code

    def kill(self) -> int:
        """SIGKILL; the exit code once the process and its output have ended."""
        return self.stop(signal.SIGKILL, 30)


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` of 127.0.0.1."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def freeze_process(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOP ``pid`` and return once every thread of it has stopped. The kernel hands the
    signal to one thread, which stops the others when it next runs: until then (the thread
    may wait for a core, or for a disk in uninterruptible sleep) the others go on, and a
    broker just "frozen" has been seen answering a whole transaction."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not all(state in "tT" for state in _thread_states(pid)):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGCONT)
            raise AssertionError(f"pid {pid} not stopped after {timeout} s")
        threading.Event().wait(0.002)


def _thread_states(pid: int) -> list[str]:
    """The state letter of each thread of ``pid`` (``/proc``'s ``stat``)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        with suppress(OSError, IndexError):  # a thread that ended meanwhile
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
    return states


def free_ports(offsets: list[int]) -> int:
    """A port ``base`` for which ``base + offset`` is free for every offset (a broker of the
    test's own and its other listeners), below the kernel's ephemeral range: a port picked in
    that range, and free until its server binds it, can be taken meanwhile by any client's
    outgoing connection (the suite's clients open many); below it only a listener takes one."""
    low = _ephemeral_low()
    top = low - max(offsets) - 1
    for _ in range(200):
        if top > _LOWEST_PICKED + 1000:
            base = _PICKED.randrange(_LOWEST_PICKED, top)
        else:  # a kernel whose ephemeral range starts low: take what it gives
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                base = int(sock.getsockname()[1])
        if base + max(offsets) < 65535 and all(port_free(base + n) for n in offsets):
            return base
    raise RuntimeError(f"no free ports at offsets {offsets}")


def free_port() -> int:
    """A free port of 127.0.0.1 for a server a test starts (see :func:`free_ports`)."""
    return free_ports([0])


_LOWEST_PICKED = 10_000
_PICKED = random.Random()  # seeded from the system: xdist workers pick apart


def _ephemeral_low() -> int:
    """Where the kernel's range of ports for outgoing connections starts."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


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


def wait_committed(admin: Admin, group: str, count: int, timeout: float = 60.0) -> None:
    """Until ``group``'s committed offsets add up to ``count`` (``timeout`` seconds at most):
    the broker's word that the app (or its transactions) committed them."""
    deadline = time.monotonic() + timeout
    while sum(lag.committed or 0 for lag in admin.read_lags([group])) < count:
        assert time.monotonic() < deadline, admin.read_lags([group])
        threading.Event().wait(0.1)


def commit_offsets(
    bootstrap: str, group: str, offsets: list[TopicPartition], timeout: float = 60.0
) -> None:
    """Commit ``offsets`` for ``group`` as one of its consumers would. A broker just started
    answers a first commit with a retriable coordinator error (``NOT_COORDINATOR`` while it
    loads ``__consumer_offsets``): those are retried until ``timeout``."""
    deadline = time.monotonic() + timeout
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as error:
                if not error.args[0].retriable() or time.monotonic() > deadline:
                    raise
                threading.Event().wait(0.2)
    finally:
        consumer.close()


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


def read_to_end(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Message]:
    """Every committed record of ``topic`` (``read_committed``), each partition read to its
    end as it is now (bounded by ``timeout`` seconds), in partition order, each partition in
    offset order: for a topic whose record count is not known ahead (a changelog, a
    transactional output)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        received: list[Message] = []
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(ended) < len(partitions):
            assert time.monotonic() < deadline, f"{topic} was not read to its end: {ended}"
            for message in consumer.consume(num_messages=500, timeout=0.5):
                error = message.error()
                if error is None:
                    received.append(message)
                else:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    ended.add(message.partition())
        return sorted(received, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()
