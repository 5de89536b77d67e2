"""A partition whose jobs have been quick runs its small batches on the listener's thread
(inside ``add``), saving the hand-off to a worker; anything else goes to the pool.

The "quick" threshold is patched in each test so that a busy machine cannot make a trivial
job look slow (or a sleeping one look quick)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

from conveyor import Consumer
from conveyor.processing import executor as executor_module
from conveyor.processing.hook_runs import HookRuns
from conveyor.tracing import Tracing
from conveyor.tracing import process_span as process_span_module
from unit.processing.fakes import Rig, raws, rig, settings

STREAK = executor_module._QUICK_STREAK


class Recording(Consumer):
    seen: list[tuple[int, str]]

    def consume(self) -> None:
        for message in self.messages:
            type(self).seen.append((message.offset, threading.current_thread().name))


def recording() -> type[Recording]:
    return type("Recorded", (Recording,), {"seen": []})


def slow_at_offsets(
    consumer: type[Recording], offsets: set[int], slow: Callable[[], object]
) -> type[Recording]:
    """``consumer``, calling ``slow()`` in a batch that ends at one of ``offsets``."""

    class Slow(consumer):  # type: ignore[valid-type,misc]
        def consume(self) -> None:
            super().consume()
            if self.messages.last.offset in offsets:
                slow()

    return Slow


def warm(r: Rig, count: int = STREAK) -> int:
    """``count`` batches through the pool (the streak that allows inline runs); the next offset."""
    for offset in range(count):
        r.executor.add(raws(offset), 1_000, alone=True)
        assert r.listener.run_jobs() == 1
    return count


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "_QUICK_JOB", 60.0)


@pytest.mark.usefixtures("quick")
def test_after_a_streak_of_quick_jobs_a_lone_batch_runs_inside_add() -> None:
    consumer = recording()
    r = rig(consumer)
    for offset in range(STREAK):
        r.executor.add(raws(offset), 1_000, alone=True)
        assert len(r.listener.jobs) == 1, f"batch {offset} before the streak: to the pool"
        r.listener.run_jobs()
    r.executor.add(raws(STREAK), 1_000, alone=True)
    assert r.listener.jobs == [], "run in add, not queued"
    assert r.listener.ran_here == 1, "through the listener's run_here (counted as pool work)"
    assert consumer.seen[-1][0] == STREAK
    assert [offset for offset, _ in consumer.seen] == list(range(STREAK + 1)), "in order"
    assert r.executor.marked == STREAK + 1
    assert r.listener.running_jobs == 0, "counted as a job of the listener, and finished"


@pytest.mark.usefixtures("quick")
@pytest.mark.parametrize(
    ("batch", "alone"),
    [
        (raws, False),  # the poll also brought other partitions' messages
        (lambda start: raws(*range(start, start + 17)), True),  # more than a small batch
    ],
    ids=["not alone", "17 messages"],
)
def test_other_batches_go_to_the_pool(batch: Any, alone: bool) -> None:
    r = rig(recording())
    start = warm(r)
    r.executor.add(batch(start), 1_000, alone=alone)
    assert len(r.listener.jobs) == 1


@pytest.mark.usefixtures("quick")
def test_a_batch_added_while_a_job_runs_waits_for_that_job() -> None:
    """Order: a partition whose job is queued (or running) never runs a second one inline."""
    consumer = recording()
    r = rig(consumer)
    start = warm(r)
    r.executor.add(raws(start), 1_000)  # not alone: queued
    r.executor.add(raws(start + 1), 1_000, alone=True)
    assert len(r.listener.jobs) == 1
    assert consumer.seen[-1][0] == start - 1
    r.listener.run_jobs()
    assert [offset for offset, _ in consumer.seen[-2:]] == [start, start + 1]


def test_a_slow_job_sends_the_partition_back_to_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "_QUICK_JOB", 60.0)
    slow_at: set[int] = set()
    consumer = recording()
    # at one of slow_at, this job counts slow
    r = rig(slow_at_offsets(consumer, slow_at, lambda: setattr(executor_module, "_QUICK_JOB", 0)))
    start = warm(r)
    slow_at.add(start)
    r.executor.add(raws(start), 1_000, alone=True)
    assert r.listener.jobs == [], "still quick when it started: inline"
    monkeypatch.setattr(executor_module, "_QUICK_JOB", 60.0)
    for offset in range(start + 1, start + 1 + STREAK):
        r.executor.add(raws(offset), 1_000, alone=True)
        assert len(r.listener.jobs) == 1, "after a slow job: the pool, until quick again"
        r.listener.run_jobs()
    r.executor.add(raws(start + 1 + STREAK), 1_000, alone=True)
    assert r.listener.jobs == [], "quick again for a whole streak: inline again"
    assert [offset for offset, _ in consumer.seen] == list(range(start + 2 + STREAK))


@pytest.mark.usefixtures("quick")
def test_switched_off_every_batch_goes_to_the_pool() -> None:
    r = rig(recording(), app_settings=settings(inline_quick_batches=False))
    start = warm(r, 3 * STREAK)
    r.executor.add(raws(start), 1_000, alone=True)
    assert len(r.listener.jobs) == 1


class Asynchronous(Consumer):
    async def consume(self) -> None:  # type: ignore[override]
        pass


class Plain(Consumer):
    def consume(self) -> None:
        pass


@pytest.mark.usefixtures("quick")
@pytest.mark.parametrize(
    ("consumer_class", "options"),
    [(Asynchronous, {}), (Plain, {"long_running_job": True})],
    ids=["async def consume", "long_running_job"],
)
def test_never_inline(consumer_class: type[Consumer], options: dict[str, Any]) -> None:
    r = rig(consumer_class, **options)
    start = warm(r, 2 * STREAK)
    r.executor.add(raws(start), 1_000, alone=True)
    assert len(r.listener.jobs) == 1


class _Clock:
    """``perf_counter`` for the executor and the process span: moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    @staticmethod
    def time() -> float:
        return time.time()


class _SlowSpans(SpanProcessor):
    """Ending a sampled span takes ``cost`` seconds of ``clock`` (an exporter's own work)."""

    def __init__(self, clock: _Clock, cost: float) -> None:
        self.clock, self.cost = clock, cost

    def on_end(self, span: ReadableSpan) -> None:
        self.clock.now += self.cost


@pytest.mark.parametrize("sampled", [True, False], ids=["sampled", "not sampled"])
def test_time_spent_on_a_sampled_trace_does_not_break_the_streak(
    monkeypatch: pytest.MonkeyPatch, sampled: bool
) -> None:
    """A traced message's spans are the tracer's cost: one message in a hundred being sampled
    must not send the next batches to the pool. The consumer's own slow work still does."""
    clock = _Clock()
    monkeypatch.setattr(executor_module, "time", clock)
    monkeypatch.setattr(process_span_module, "time", clock)
    monkeypatch.setattr(executor_module, "_QUICK_JOB", 0.5)
    provider = TracerProvider(sampler=ALWAYS_ON if sampled else ALWAYS_OFF)
    provider.add_span_processor(_SlowSpans(clock, 1.0))
    tracing = Tracing()
    tracing.enable(tracer_provider=provider)
    slow_at: set[int] = set()
    consumer = recording()
    r = rig(slow_at_offsets(consumer, slow_at, lambda: setattr(clock, "now", clock.now + 1.0)))
    start = warm(r)
    r.executor.context = dataclasses.replace(r.executor.context, tracing=tracing)
    r.executor.hooks = HookRuns(r.executor)  # they run with the context they were made with
    r.executor.add(raws(start), 1_000, alone=True)
    assert r.listener.jobs == [], "inline: the streak holds"
    assert clock.now == (1.0 if sampled else 0.0), "the sampled span's end took its second"
    r.executor.add(raws(start + 1), 1_000, alone=True)
    assert r.listener.jobs == [], "a second spent ending a sampled span is not the job's"
    slow_at.add(start + 2)
    r.executor.add(raws(start + 2), 1_000, alone=True)
    r.executor.add(raws(start + 3), 1_000, alone=True)
    assert len(r.listener.jobs) == 1, "the consumer's own second still breaks the streak"
    r.listener.run_jobs()
    assert [offset for offset, _ in consumer.seen] == list(range(start + 4))
