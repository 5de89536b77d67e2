"""Fakes for processing's collaborators: fetched messages, a listener, timers, a producer.

Each records what was asked of it so that a test can assert it; none needs a broker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import confluent_kafka

from conveyor import App, Monitor
from conveyor.processing.context import ProcessingContext
from conveyor.processing.executor import PartitionExecutor
from conveyor.processing.partition_core import PartitionCore
from conveyor.processing.strategies import Backoff, FailurePolicy
from conveyor.processing.virtual import VirtualPartitionExecutor
from conveyor.routing.topic import Topic
from conveyor.settings import AppSettings


def FakeRaw(
    offset: int,
    topic: str = "orders",
    partition: int = 0,
    value: bytes | None = b"{}",
    key: bytes | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: int = 1_700_000_000_000,
) -> Any:
    """A fetched message as librdkafka hands it over (a real confluent-kafka ``Message``)."""
    return confluent_kafka.Message(
        topic=topic, partition=partition, offset=offset, key=key, value=value,
        headers=headers, timestamp=(1, timestamp),
    )  # fmt: skip


def ErrorRaw(code: int, partition: int = 0, topic: str = "orders") -> Any:
    """A fetched item that carries an error instead of a message."""
    return confluent_kafka.Message(
        topic=topic, partition=partition, offset=-1, error=confluent_kafka.KafkaError(code)
    )


def raws(*offsets: int, **fields: Any) -> list[Any]:
    return [FakeRaw(offset, **fields) for offset in offsets]


class FakeListener:
    """Implements the executor's ``ListenerActions``: jobs are queued and run by the test
    (:meth:`run_jobs`), librdkafka actions are recorded in :attr:`actions`."""

    def __init__(self, group_id: str = "group", commit_result: bool = True) -> None:
        self._group_id = group_id
        self.quiet = False
        self.jobs: list[Callable[[], None]] = []
        self.actions: list[tuple[Any, ...]] = []
        self.commit_result = commit_result
        self.offsets_by_time: dict[float, int] = {}
        """What :meth:`offset_for_time` answers per time (-1 otherwise)."""
        self.running_jobs = 0
        self.ran_here = 0
        self.over: set[PartitionCore] = set()

    @property
    def group_id(self) -> str:
        return self._group_id

    @property
    def quieted(self) -> bool:
        return self.quiet

    def submit(self, job: Callable[[], None]) -> None:
        self.jobs.append(job)

    def run_here(self, job: Callable[[], None]) -> None:
        self.ran_here += 1
        job()

    def submit_coroutine(self, coroutine: Any, name: str = "") -> None:
        self.jobs.append(lambda: asyncio.run(coroutine))

    def run_jobs(self, limit: int = 100) -> int:
        """Run queued jobs (and the jobs they queue) in this thread; returns how many ran."""
        ran = 0
        while self.jobs and ran < limit:
            self.jobs.pop(0)()
            ran += 1
        return ran

    def job_started(self) -> None:
        self.running_jobs += 1

    def job_finished(self) -> None:
        self.running_jobs -= 1

    def pause(self, topic: str, partition: int) -> None:
        self.actions.append(("pause", topic, partition))

    def resume(self, topic: str, partition: int, then: Callable[[], None] | None = None) -> None:
        self.actions.append(("resume", topic, partition))
        if then is not None:
            then()

    def seek(self, executor: PartitionCore, offset: int) -> None:
        self.actions.append(("seek", executor.topic, executor.partition, offset))
        executor.discard_pending()

    def commit_now(
        self, topic: str, partition: int, next_offset: int, metadata: str | None = None
    ) -> bool:
        if metadata is None:
            self.actions.append(("commit", topic, partition, next_offset))
        else:
            self.actions.append(("commit", topic, partition, next_offset, metadata))
        return self.commit_result

    def offset_for_time(self, topic: str, partition: int, when: float) -> int:
        self.actions.append(("offset_for_time", topic, partition, when))
        return self.offsets_by_time.get(when, -1)

    def group_metadata(self) -> Any:
        self.actions.append(("group_metadata",))
        return "group-metadata"

    def over_limit(self, executor: PartitionCore) -> None:
        self.over.add(executor)

    def drained(self, executor: PartitionCore) -> None:
        self.over.discard(executor)


class FakeTimers:
    """Records ``call_later``; :meth:`fire` runs what is due, in order."""

    def __init__(self) -> None:
        self.scheduled: list[FakeTimer] = []
        self.history: list[float] = []
        """Every delay asked for, in order (fired or not)."""

    def call_later(self, delay: float, action: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(delay, action)
        self.scheduled.append(timer)
        self.history.append(delay)
        return timer

    def delays(self) -> list[float]:
        return [timer.delay for timer in self.scheduled]

    def fire(self) -> int:
        due, self.scheduled = self.scheduled, []
        fired = 0
        for timer in due:
            if not timer.cancelled:
                timer.action()
                fired += 1
        return fired


@dataclass
class FakeTimer:
    delay: float
    action: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeTransactions:
    producer: FakeProducer

    def send_offsets(
        self,
        offsets: Any,
        group_metadata: Any,
        timeout: float = 30.0,
        *,
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        assert self.producer.in_transaction, "send_offsets outside a transaction"
        if metadata is None:
            self.producer.calls.append(("send_offsets", list(offsets), group_metadata))
        else:
            self.producer.calls.append(("send_offsets", list(offsets), group_metadata, metadata))


class FakeHandle:
    """A delivery handle the test completes: :meth:`deliver` (``error=None``: acknowledged)."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any], None]] = []
        self.reported = False
        self.failure: BaseException | None = None

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self.reported:
            callback(self)
        else:
            self.callbacks.append(callback)

    def deliver(self, error: BaseException | None = None) -> None:
        self.reported, self.failure = True, error
        for callback in self.callbacks:
            callback(self)

    def done(self) -> bool:
        return self.reported

    def error(self) -> BaseException | None:
        return self.failure

    def wait(self, timeout: float | None = None) -> str:
        if self.failure is not None:
            raise self.failure
        return "report"


@dataclass
class FakeProducer:
    """Records what was produced, and how: ``calls`` holds (method, message) in order."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    handles: list[FakeHandle] = field(default_factory=list)
    in_transaction: bool = False
    fail_with: BaseException | None = None

    def __post_init__(self) -> None:
        self.transactions = FakeTransactions(self)

    def produce_sync(self, **message: Any) -> str:
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append(("produce_sync", message))
        return "report"

    def produce_async(self, **message: Any) -> FakeHandle:
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append(("produce_async", message))
        handle = FakeHandle()
        self.handles.append(handle)
        return handle

    def produce_unhurried(self, message: dict[str, Any]) -> FakeHandle:
        """produce_async that leaves the poller alone: recorded as produce_async."""
        return self.produce_async(**message)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[FakeTransactions]:
        self.calls.append(("begin",))
        self.in_transaction = True
        try:
            yield self.transactions
        except BaseException:
            self.calls.append(("abort",))
            raise
        finally:
            self.in_transaction = False
        self.calls.append(("commit",))

    def methods(self) -> list[str]:
        return [call[0] for call in self.calls]


@dataclass
class Rig:
    """An executor wired to fakes, and the fakes to assert on."""

    executor: PartitionCore
    listener: FakeListener
    timers: FakeTimers
    producer: FakeProducer
    transactional: FakeProducer
    monitor: Monitor
    crashes: list[tuple[BaseException, str]]


def settings(**overrides: Any) -> AppSettings:
    values: dict[str, Any] = {"client_id": "unit", "kafka": {"bootstrap.servers": "127.0.0.1:1"}}
    values.update(overrides)
    return AppSettings(**values)


def route(consumer_class: type[Any], name: str = "orders", **options: Any) -> Topic:
    """A route declared the way users declare it (options checked by ``app.routes.topic``)."""
    app = App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"})
    return app.routes.topic(name, consumer_class, **options)


def rig(
    consumer_class: type[Any],
    *,
    partition: int = 0,
    app_settings: AppSettings | None = None,
    listener: FakeListener | None = None,
    **options: Any,
) -> Rig:
    """An executor for a route of ``consumer_class`` with ``options``, on fakes."""
    topic = route(consumer_class, **options)
    app_settings = app_settings or settings()
    monitor = Monitor()
    producer, transactional = FakeProducer(), FakeProducer()
    crashes: list[tuple[BaseException, str]] = []
    context = ProcessingContext(
        settings=app_settings,
        monitor=monitor,
        producer=lambda: producer,
        transactional_producer=lambda: transactional,
        on_crash=lambda error, where: crashes.append((error, where)),
    )
    policy = FailurePolicy(
        topic.name,
        topic.dead_letter_queue,
        Backoff.for_route(topic, app_settings),
        monitor,
        context.producer,
        context.transactional_producer,
    )
    listener = listener or FakeListener()
    timers = FakeTimers()
    kind = PartitionExecutor if topic.virtual_partitions is None else VirtualPartitionExecutor
    executor = kind(listener, topic, partition, context, policy, timers)
    return Rig(executor, listener, timers, producer, transactional, monitor, crashes)
