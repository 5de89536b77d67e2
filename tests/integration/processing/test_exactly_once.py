"""Consume-transform-produce in one Kafka transaction (``with self.transaction():``), against
the real broker: a read_committed reader sees every input's outputs exactly once — after a
failure inside the block (aborted, retried), and after a `conveyor server` is killed with
SIGKILL again and again mid-transaction (Jepsen's aborted reads and lost writes: no output of
an aborted transaction is read, none of a committed one is missing)."""

from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from typing import Any

import confluent_kafka
import pytest

from conveyor import Admin, App, Consumer, Producer
from conveyor.errors import TransactionError
from helpers import running, wait_committed
from integration.processing.test_server import Server


def produce_inputs(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "partition": n % partitions, "key": f"k{n}", "payload": f"{n}"}
             for n in range(count)]
        )  # fmt: skip


def read_outputs(bootstrap: str, topic: str, isolation: str) -> list[tuple[str, bytes]]:
    """Every output of ``topic`` as (input, payload), read to the end (the last stable offset
    for read_committed) once."""
    reader = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
    })  # fmt: skip
    try:
        metadata = reader.list_topics(topic, timeout=10).topics[topic]
        partitions = sorted(metadata.partitions)
        reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        ended: set[int] = set()
        found: list[tuple[str, bytes]] = []
        deadline = time.monotonic() + 30
        while len(ended) < len(partitions) and time.monotonic() < deadline:
            for message in reader.consume(500, 0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == confluent_kafka.KafkaError._PARTITION_EOF, error
                    ended.add(message.partition())
                    continue
                found.append((dict(message.headers())["input"].decode(), message.value()))
        assert len(ended) == len(partitions), "read to the end"
        return found
    finally:
        reader.close()


def committed_outputs(bootstrap: str, topic: str, expected: int) -> list[tuple[str, bytes]]:
    """read_committed outputs once ``expected`` are visible: a crashed producer's open
    transaction holds back the last stable offset until the broker aborts it."""
    deadline = time.monotonic() + 60
    while True:
        outputs = read_outputs(bootstrap, topic, "read_committed")
        if len(outputs) >= expected or time.monotonic() > deadline:
            return outputs
        threading.Event().wait(1.0)  # the broker's transaction timeout: nothing to wait on


def assert_exactly_once(outputs: list[tuple[str, bytes]], inputs: list[str]) -> None:
    counts = Counter(outputs)
    expected = Counter({(where, kind): 1 for where in inputs for kind in (b"a", b"b")})
    missing = expected - counts
    extra = counts - expected
    assert not missing, f"lost writes: {sorted(missing)[:10]}"
    assert not extra, f"seen more than once (or from an aborted transaction): {sorted(extra)[:10]}"


class FailsOnceInside(Consumer):
    """Fails once, inside the transaction, after producing the outputs of offset 5."""

    failed = threading.Event()
    output = ""

    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                where = f"{message.partition}:{message.offset}".encode()
                for kind in (b"a", b"b"):  # sync: on the broker before the failure
                    self.produce_sync(topic=self.output, payload=kind, headers=[("input", where)])
                if message.partition == 0 and message.offset == 5 and not self.failed.is_set():
                    self.failed.set()
                    raise RuntimeError("fails inside the transaction")
            self.mark_as_consumed(self.messages.last)


class FailsOnceInsideOnTheLoop(Consumer):
    """FailsOnceInside as an ``async def consume()``: ``async with self.transaction()``, each
    output awaited (both partitions' lanes share the app's loop and take turns at the
    producer's one transaction)."""

    failed = threading.Event()
    output = ""

    async def consume(self) -> None:
        async with self.transaction():
            for message in self.messages:
                where = f"{message.partition}:{message.offset}".encode()
                for kind in (b"a", b"b"):
                    await self.produce_async(
                        topic=self.output, payload=kind, headers=[("input", where)]
                    )
                if message.partition == 0 and message.offset == 5 and not self.failed.is_set():
                    self.failed.set()
                    raise RuntimeError("fails inside the transaction")
            self.mark_as_consumed(self.messages.last)


@pytest.mark.parametrize(
    ("consumer_class", "joint"),
    [
        (FailsOnceInside, False),
        (FailsOnceInsideOnTheLoop, False),
        (FailsOnceInside, True),
        (FailsOnceInsideOnTheLoop, True),
    ],
    ids=["thread", "loop", "thread-joint", "loop-joint"],
)
def test_a_failure_inside_the_transaction_aborts_it_and_the_retry_commits_once(
    kafka_bootstrap: str,
    new_topic,
    kafka_admin: Admin,
    consumer_class: type[FailsOnceInside] | type[FailsOnceInsideOnTheLoop],
    joint: bool,
) -> None:
    """``joint``: the blocks of both partitions' batches of 2 messages join one transaction
    (``transaction_interval``), so that the failing batch comes after earlier batches of its
    own partition and of the other in the transaction it aborts: all of them run again."""
    inputs, outputs = new_topic(partitions=2), new_topic(partitions=2)
    produce_inputs(kafka_bootstrap, inputs, 40, 2)
    consumer_class.failed.clear()
    consumer_class.output = outputs
    group = f"eos-{uuid.uuid4().hex[:8]}"
    app = App(
        client_id="eos",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group},
        max_wait_time=0.2,
        pause_timeout=0.2,
        **({"transaction_interval": 0.5, "max_messages": 2} if joint else {}),
    )
    app.routes.topic(inputs, consumer_class)
    with running(app):
        committed = committed_outputs(kafka_bootstrap, outputs, 80)
        wait_committed(kafka_admin, group, 40, timeout=30)
    assert consumer_class.failed.is_set()
    assert_exactly_once(committed, [f"{n % 2}:{n // 2}" for n in range(40)])
    everything = read_outputs(kafka_bootstrap, outputs, "read_uncommitted")
    assert len(everything) > 80, "the aborted transaction's outputs exist, unread"
    assert {(lag.partition, lag.committed) for lag in kafka_admin.read_lags([group])} == {
        (0, 20),
        (1, 20),
    }, "the offsets were committed with the transactions"


def test_transactions_do_not_nest_and_a_plain_app_refuses_nothing(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    errors: list[BaseException] = []
    done = threading.Event()

    class Nests(Consumer):
        def consume(self) -> None:
            with self.transaction():
                try:
                    with self.transaction():
                        pass
                except TransactionError as error:
                    errors.append(error)
                self.mark_as_consumed(self.messages.last)
            done.set()

    app = App(kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"n-{uuid.uuid4().hex}"},
              max_wait_time=0.2)  # fmt: skip
    app.routes.topic(topic, Nests)
    with running(app):
        produce_inputs(kafka_bootstrap, topic, 1, 1)
        assert done.wait(30)
    assert len(errors) == 1
    assert "do not nest" in str(errors[0])


KILLS = int(os.environ.get("CONVEYOR_EOS_KILLS", "6"))
"""Kill rounds of the repeated-kill test (``CONVEYOR_EOS_KILLS=20`` for the long form)."""


def test_outputs_are_exactly_once_under_repeated_sigkill(
    kafka_bootstrap: str, new_topic, kafka_admin: Admin
) -> None:
    """SIGKILL after SIGKILL, each landing at one of three kinds of moments in turn: right after
    an assignment (while its start offsets are read), with offsets pending in an open
    transaction (a fault injected right after ``send_offsets``: the broker then answers the
    next process's offset fetch with UNSTABLE_OFFSET_COMMIT), and mid-stream at a random
    moment. A read_committed reader sees every input's outputs exactly once.

    The transaction timeout is ten minutes: a restarted process that did not fence its
    crashed predecessor's transaction (the slot's stable ``transactional.id``) would wait that
    long for its offsets, and the bounded waits below fail instead."""
    count, partitions = 6_000, 3
    inputs, outputs = new_topic(partitions=partitions), new_topic(partitions=partitions)
    produce_inputs(kafka_bootstrap, inputs, count, partitions)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    extra: dict[str, Any] = {"OUTPUT": outputs, "TRANSACTION_TIMEOUT_MS": "600000"}
    rng = random.Random(33)
    modes = itertools.cycle(["offsets", "assigned", "random"])
    recoveries: list[float] = []  # a process's start to its first transaction's end
    for _ in range(KILLS):
        mode = next(modes)
        fault = {"KILL_AFTER_OFFSETS": str(rng.randint(1, 3))} if mode == "offsets" else {}
        started = time.monotonic()
        server = Server(inputs, group, kafka_bootstrap, slow=0.002, app="eos_app:app",
                        **extra, **fault)  # fmt: skip
        try:
            if mode == "assigned":
                assert server.wait_for(lambda lines: any(_assigned_some(x) for x in lines), 90)
            else:
                assert server.wait_for(_a_batch_or_the_end, 90), server.lines[-10:]
                recoveries.append(time.monotonic() - started)
                if mode == "offsets":
                    assert server.wait_for(lambda lines: "<eof>" in lines, 90), server.lines[-5:]
                    assert "killed with offsets in an open transaction" in server.lines
                else:
                    threading.Event().wait(rng.uniform(0.1, 0.6))
        finally:
            server.stop(signal.SIGKILL)
    final = Server(inputs, group, kafka_bootstrap, slow=0.002, app="eos_app:app", **extra)
    try:
        deadline = time.monotonic() + 120
        while sum(lag.committed or 0 for lag in kafka_admin.read_lags([group])) < count:
            assert time.monotonic() < deadline, kafka_admin.read_lags([group])
            assert final.process.poll() is None, final.lines[-20:]
            threading.Event().wait(0.2)  # another process commits: the broker is the witness
    finally:
        assert final.stop(signal.SIGTERM) == 0
    committed = committed_outputs(kafka_bootstrap, outputs, 2 * count)
    assert_exactly_once(committed, [f"{n % partitions}:{n // partitions}" for n in range(count)])
    everything = read_outputs(kafka_bootstrap, outputs, "read_uncommitted")
    assert len(everything) > 2 * count, "kills landed inside transactions (their outputs exist)"
    print(
        f"{KILLS} kills; start to first transaction: {', '.join(f'{r:.1f}' for r in recoveries)} s"
    )


def _assigned_some(line: str) -> bool:
    return line.startswith("assigned ") and len(line) > len("assigned ")


def _a_batch_or_the_end(lines: list[str]) -> bool:
    """A transaction ended: committed (a batch line), or cut by the injected kill."""
    return any(line.startswith(("batch", "killed")) for line in lines) or "<eof>" in lines


class ProducesTwo(Consumer):
    """Two outputs per input, in the app's joint transaction (``transaction_interval``)."""

    output = ""
    pause = threading.Event()  # never set: a short wait per message, without a sleep loop

    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                where = f"{message.partition}:{message.offset}".encode()
                for kind in (b"a", b"b"):
                    self.produce_async(topic=self.output, payload=kind, headers=[("input", where)])
                self.pause.wait(0.004)  # the stream outlasts the second member's arrival
            self.mark_as_consumed(self.messages.last)


def test_a_rebalance_under_a_transaction_interval_commits_and_copies_nothing_twice(
    kafka_bootstrap: str, new_topic, kafka_admin: Admin
) -> None:
    """A second app joins the group while the first's joint transaction holds batches of
    partitions it is about to lose: the revocation commits it first, so the new owner starts
    after them; a read_committed reader sees every input's outputs once."""
    count, partitions = 2_000, 4  # 8 s of work at 2 workers: 4 s for the first member alone
    inputs, outputs = new_topic(partitions=partitions), new_topic(partitions=partitions)
    produce_inputs(kafka_bootstrap, inputs, count, partitions)
    ProducesTwo.output = outputs
    group = f"eos-joint-{uuid.uuid4().hex[:8]}"

    aborted: list[Any] = []

    def member(name: str) -> App:
        app = App(
            client_id="eos-joint",
            kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group},
            instance_id=name,  # two transactional producers in one process: two ids
            max_wait_time=0.2,
            max_messages=20,
            concurrency=2,
            transaction_interval=0.5,
        )
        app.routes.topic(inputs, ProducesTwo)
        app.monitor.subscribe("transaction.aborted", aborted.append)
        return app

    def committed() -> int:
        return sum(lag.committed or 0 for lag in kafka_admin.read_lags([group]))

    with running(member("one")):
        deadline = time.monotonic() + 60
        while committed() == 0:
            assert time.monotonic() < deadline, "the first member committed nothing"
            threading.Event().wait(0.1)  # committed by transactions: the broker is the witness
        assert committed() < count, "the input ran out before the second member came"
        with running(member("two")):
            deadline = time.monotonic() + 120
            while committed() < count:
                assert time.monotonic() < deadline, kafka_admin.read_lags([group])
                threading.Event().wait(0.1)
    found = committed_outputs(kafka_bootstrap, outputs, 2 * count)
    assert_exactly_once(found, [f"{n % partitions}:{n // partitions}" for n in range(count)])
    assert aborted == [], "the revocation committed the open transaction (nothing was redone)"
