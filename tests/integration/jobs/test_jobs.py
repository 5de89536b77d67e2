"""Background jobs on a real broker: enqueued jobs run; a failing job is retried later with
growing gaps while the other jobs of its partition go on; one that keeps failing ends dead
with its error; arguments that do not fit die at once; enqueue_in waits; one key's jobs run
in order with 8 workers; a malformed attempt header dies at once; a parameter named key;
an attempt read twice retries and dies once; a consumer hands off to a job in its
transaction."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pydantic
import pytest

from conveyor import App, Consumer
from conveyor.admin import migrate
from conveyor.jobs import current_job
from conveyor.jobs.wire import ATTEMPT, DEAD_CLASS, DEAD_MESSAGE, ID, NAME, encode, header
from conveyor.web.reading.explorer import Explorer
from conveyor.web.reading.explorer_query import Start
from helpers import Record, running


def make_app(bootstrap: str, **options: Any) -> App:
    suffix = uuid.uuid4().hex[:8]
    app = App(
        client_id=f"jobs-{suffix}",
        kafka={"bootstrap.servers": bootstrap, "group.id": f"jobs-{suffix}"},
        max_wait_time=0.1,
        **options,
    )
    app.schedules.enable(topic=f"test-schedules-{suffix}", partitions=1)
    return app


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_a_failing_job_is_retried_later_with_growing_gaps_while_others_run(
    kafka_bootstrap: str,
) -> None:
    app = make_app(kafka_bootstrap)
    runs: list[float] = []
    others = Record()

    @app.job(queue=unique("q"), retries=3, backoff=0.4)
    def flaky(order: int) -> None:
        runs.append(time.monotonic())
        context = current_job()
        assert context is not None
        if context.attempt < 3:
            raise RuntimeError(f"not yet ({context.attempt})")

    @app.job(queue=flaky.queue.name)
    def steady(n: int) -> None:
        others.add((n, time.monotonic()))

    app.jobs.queue(unique("unused"))  # a queue with no job yet is fine
    migrate(app.admin, app.routes)
    with running(app):
        flaky.enqueue(1, key="k")
        for n in range(5):
            steady.enqueue(n, key="k")  # the same key: the same partition
        assert others.wait_for(lambda items: len(items) == 5)
        deadline = time.monotonic() + 30
        while len(runs) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(runs) == 3, "failed twice, then succeeded: three runs"
    first_gap, second_gap = runs[1] - runs[0], runs[2] - runs[1]
    assert first_gap >= 0.35
    assert second_gap >= 0.75, "the gap doubles"
    assert max(at for _, at in others.items) < runs[1], "the partition went on meanwhile"


def test_a_job_that_always_fails_ends_dead_with_its_error(
    kafka_bootstrap: str, read_messages
) -> None:
    app = make_app(kafka_bootstrap)
    attempts = Record()

    @app.job(queue=unique("q"), retries=1, backoff=0.1)
    def doomed(order: int) -> None:
        attempts.add(order)
        raise ValueError(f"order {order} cannot be billed")

    @app.job(queue=doomed.queue.name)
    def typed(order: int) -> None:
        raise AssertionError("never runs with a wrong argument")

    migrate(app.admin, app.routes)
    with running(app):
        doomed.enqueue(7)
        typed.enqueue("seven")  # no retry makes a str an int: dead at once
        dead = read_messages(doomed.queue.dead_topic, 2)
    assert attempts.items == [7, 7], "the first attempt and one retry"
    by_class = {header(m.headers(), DEAD_CLASS): m for m in dead}
    assert set(by_class) == {"ValueError", "InvalidArguments"}
    failed = by_class["ValueError"]
    assert header(failed.headers(), DEAD_MESSAGE) == "order 7 cannot be billed"
    assert header(failed.headers(), "conveyor-job-attempt") == "2"
    assert "order must be int" in (
        header(by_class["InvalidArguments"].headers(), DEAD_MESSAGE) or ""
    )


class Invoice(pydantic.BaseModel):
    order: int
    amount: float


def test_enqueue_in_waits_and_model_arguments_arrive_as_models(kafka_bootstrap: str) -> None:
    app = make_app(kafka_bootstrap)
    ran = Record()

    @app.job(queue=unique("q"))
    async def bill(invoice: Invoice) -> None:  # an async job, a model argument
        context = current_job()
        assert context is not None
        ran.add((time.monotonic(), invoice, context.id))

    migrate(app.admin, app.routes)
    with running(app):
        started = time.monotonic()
        job_id = bill.enqueue_in(1.5, Invoice(order=1, amount=9.5))
        assert ran.wait_for(lambda items: len(items) == 1, timeout=30)
    [(at, invoice, seen_id)] = ran.items
    assert at - started >= 1.4, "not before its delay"
    assert invoice == Invoice(order=1, amount=9.5)
    assert seen_id == job_id, "the job reads its id (an idempotency key)"


@pytest.mark.parametrize("lanes", [False, True], ids=["partitions", "lanes"])
def test_one_keys_jobs_run_in_order_with_8_workers(kafka_bootstrap: str, lanes: bool) -> None:
    app = make_app(kafka_bootstrap, concurrency=8)
    seen = Record()
    if lanes:
        app.jobs.queue(queue := unique("q"), lanes=4)
    else:
        queue = unique("q")

    @app.job(queue=queue)
    def step(customer: str, n: int) -> None:
        seen.add((customer, n))

    app_queue = step.queue
    migrate(app.admin, app.routes)
    with running(app):
        for n in range(50):
            for customer in ("a", "b", "c", "d"):
                step.enqueue(customer, n, key=customer)
        assert seen.wait_for(lambda items: len(items) >= 200)
    for customer in ("a", "b", "c", "d"):
        assert [n for c, n in seen.items if c == customer] == list(range(50))
    assert app_queue.topic.startswith("jobs-")


def test_a_job_past_its_timeout_is_stopped_and_dies_with_the_timeout(
    kafka_bootstrap: str, read_messages
) -> None:
    app = make_app(kafka_bootstrap)
    stopped = Record()

    @app.job(queue=unique("q"), retries=0, timeout=0.3)
    def endless(n: int) -> None:
        try:
            while True:
                time.sleep(0.01)  # each short sleep ends: the interrupt lands in between
        finally:
            stopped.add(n)

    @app.job(queue=endless.queue.name, retries=0, timeout=0.3)
    async def endless_async(n: int) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.add(n)

    migrate(app.admin, app.routes)
    with running(app):
        endless.enqueue(1)
        endless_async.enqueue(2)
        dead = read_messages(endless.queue.dead_topic, 2)
    assert sorted(stopped.items) == [1, 2]
    assert {header(m.headers(), DEAD_CLASS) for m in dead} == {"JobTimeoutError", "TimeoutError"}


def _every_message(app: App, topic: str) -> list[Any]:
    """Every committed message of ``topic``, read to its end (a read_committed reader), once
    it holds one (a dead job is sent on by the schedules' dispatcher: a bounded wait)."""
    raws: list[Any] = []
    for _ in range(300):
        raws, complete = Explorer(app.settings.kafka, timeout=30).scan(
            topic, Start("offset", 0), 1000
        )
        assert complete
        if raws:
            break
        threading.Event().wait(0.1)
    return raws


def test_a_malformed_attempt_header_makes_the_job_die_at_once_saying_so(
    kafka_bootstrap: str,
) -> None:
    app = make_app(kafka_bootstrap)
    ran = Record()

    @app.job(queue=unique("q"), name="count")
    def count(n: int) -> None:
        ran.add(n)

    migrate(app.admin, app.routes)
    with running(app):
        envelope, payload = encode("count", (1,), {})
        app.producer.produce_sync(
            topic=count.queue.topic, payload=payload, key="k",
            headers=[(NAME, "count"), (ID, envelope.id), (ATTEMPT, "second")],
        )  # fmt: skip
        count.enqueue(2, key="k")  # behind it in its partition
        assert ran.wait_for(lambda items: items == [2]), "the partition went on past it"
        [dead] = _every_message(app, count.queue.dead_topic)
    assert header(dead.headers(), DEAD_CLASS) == "ValueError"
    assert header(dead.headers(), DEAD_MESSAGE) == (
        "the conveyor-job-attempt header is malformed: 'second' (a whole number from 1 was "
        "expected)"
    )
    assert ran.items == [2], "the malformed one never ran"


def test_a_parameter_named_key_and_schedules_enabled_after_the_first_job(
    kafka_bootstrap: str,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    app = App(
        client_id=f"jobs-{suffix}",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"jobs-{suffix}"},
        max_wait_time=0.1,
    )
    seen = Record()

    @app.job(queue=unique("q"))
    def greet(key: str, n: int) -> None:
        context = current_job()
        assert context is not None
        seen.add((key, n, context.key))

    app.schedules.enable(topic=f"test-schedules-{suffix}", partitions=1)  # after the job
    migrate(app.admin, app.routes)
    with running(app):
        greet.enqueue(key="a", n=1)
        greet.options(key="customer-7").enqueue_in(0.2, key="b", n=2)
        assert seen.wait_for(lambda items: len(items) == 2)
    assert sorted(seen.items) == [("a", 1, None), ("b", 2, "customer-7")]
    assert f"test-schedules-{suffix}" in app.admin.list_topics(), "the app's schedules topic"


def test_an_attempt_read_twice_is_retried_once_and_dies_once(kafka_bootstrap: str) -> None:
    app = make_app(kafka_bootstrap)
    attempts = Record()
    done = Record()

    @app.job(queue=unique("q"), name="twice", retries=1, backoff=1.0)
    def twice(n: int) -> None:
        context = current_job()
        assert context is not None
        attempts.add(context.attempt)
        raise ValueError("always")

    @app.job(queue=twice.queue.name, name="after")
    def after(n: int) -> None:
        done.add(n)

    migrate(app.admin, app.routes)
    envelope, payload = encode("twice", (1,), {})
    copy = {"topic": twice.queue.topic, "payload": payload, "key": "k",
            "headers": [(NAME, "twice"), (ID, envelope.id), (ATTEMPT, "1")]}  # fmt: skip
    with running(app):
        app.producer.produce_many_sync([copy, copy])  # its first attempt, read twice
        assert attempts.wait_for(lambda items: 2 in items), "retried"
        # behind any second retry: both retries fell due 1 s after the failures that scheduled
        # them, and the schedules go out in the order they fall due, into the key's partition
        after.enqueue_in(3.0, 1, key="k")
        assert done.wait_for(lambda items: items == [1])
        dead = _every_message(app, twice.queue.dead_topic)
    assert sorted(attempts.items) == [1, 1, 2], "the same retry scheduled twice ran once"
    assert len(dead) == 1, "dead once"


class _Source(pydantic.BaseModel):
    n: int


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_consumer_hands_off_to_a_job_inside_its_transaction(
    kafka_bootstrap: str, flavour: str
) -> None:
    """An enqueue inside the consumer's transaction commits with it: the try that aborts
    enqueued nothing a worker sees; ``enqueue_async`` from ``async def consume()`` too."""
    app = make_app(kafka_bootstrap, pause_timeout=0.2)
    ran = Record()
    source = unique("handoff")

    @app.job(queue=unique("q"), name="welcome")
    def welcome(n: int) -> None:
        ran.add(n)

    class Handoff(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.payload["n"] == 3:  # outside any transaction
                    welcome.enqueue(3, key="k")
            with self.transaction():
                for message in self.messages:
                    if message.payload["n"] != 3:
                        welcome.enqueue(message.payload["n"], key="k")
                    self.mark_as_consumed(message)
                if self.attempt == 1 and message.payload["n"] != 3:
                    raise RuntimeError("the first try aborts after its enqueues")

    class AsyncHandoff(Consumer):
        async def consume(self) -> None:
            for message in self.messages:
                if message.payload["n"] == 3:
                    await welcome.enqueue_async(3, key="k")
            async with self.transaction():
                for message in self.messages:
                    if message.payload["n"] != 3:
                        await welcome.enqueue_async(message.payload["n"], key="k")
                    self.mark_as_consumed(message)
                if self.attempt == 1 and message.payload["n"] != 3:
                    raise RuntimeError("the first try aborts after its enqueues")

    app.routes.topic(source, Handoff if flavour == "sync" else AsyncHandoff, partitions=1)
    migrate(app.admin, app.routes)
    with running(app):
        app.producer.produce_many_sync([{"topic": source, "payload": {"n": n}} for n in (1, 2)])
        assert ran.wait_for(lambda items: {1, 2} <= set(items))
        app.producer.produce_sync(topic=source, payload={"n": 3})
        assert ran.wait_for(lambda items: 3 in items), "behind every earlier job of its key"
    assert sorted(ran.items) == [1, 2, 3], "the aborted tries' jobs never ran"
