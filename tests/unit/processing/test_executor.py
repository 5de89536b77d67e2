"""The partition executor on its own, with a fake listener: batches in order, one job per
partition, marking, retries with back-off, dead letters, revocation, flow control."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest

from conveyor import Consumer, Throttle
from conveyor.processing.executor import PartitionExecutor
from unit.processing.fakes import FakeListener, raws, rig, settings


class Recording(Consumer):
    """Records the offsets of each batch; raises where told."""

    batches: list[list[int]]
    fail_at: set[int]

    def consume(self) -> None:
        offsets = [message.offset for message in self.messages]
        type(self).batches.append(offsets)
        for message in self.messages:
            if message.offset in type(self).fail_at:
                raise RuntimeError(f"bad {message.offset}")
            self.mark_as_consumed(message)


def recording(fail_at: set[int] | None = None) -> type[Recording]:
    return type("Orders", (Recording,), {"batches": [], "fail_at": set(fail_at or ())})


class TestBatches:
    def test_the_running_batch_counts_as_waiting_for_the_lag_in_seconds(self) -> None:
        """While a batch runs and nothing else is fetched, its first message is the oldest one
        not processed (the lag in seconds is measured from it)."""
        seen: list[int | None] = []
        executor: list[PartitionExecutor] = []

        class Looking(Consumer):
            def consume(self) -> None:
                first = executor[0].first_waiting()
                seen.append(None if first is None else first.offset())

        r = rig(Looking, max_messages=2)
        executor.append(r.executor)
        assert r.executor.first_waiting() is None
        r.executor.add(raws(0, 1, 2), high_watermark=3)
        assert r.executor.first_waiting().offset() == 0
        r.listener.run_jobs()
        assert seen == [0, 2]
        assert r.executor.first_waiting() is None

    def test_batches_hold_at_most_max_messages_in_order(self) -> None:
        """Pending messages are handed over in offset order, max_messages at a time."""
        consumer = recording()
        r = rig(consumer, max_messages=3)
        r.executor.add(raws(*range(7)), high_watermark=7)
        assert r.listener.run_jobs() == 1, "one job drains the partition"
        assert consumer.batches == [[0, 1, 2], [3, 4, 5], [6]]
        assert r.executor.marked == 7

    def test_one_job_per_partition_at_a_time(self) -> None:
        """Messages added while a job is scheduled join it; no second job is submitted."""
        r = rig(recording())
        r.executor.add(raws(0, 1), high_watermark=2)
        r.executor.add(raws(2), high_watermark=3)
        assert len(r.listener.jobs) == 1
        r.listener.run_jobs()
        r.executor.add(raws(3), high_watermark=4)
        assert len(r.listener.jobs) == 1, "a new job once the previous one ended"

    def test_manual_offset_management_marks_nothing_itself(self) -> None:
        """With manual_offset_management, only the consumer's own marks count."""

        class Silent(Consumer):
            def consume(self) -> None:
                return None

        r = rig(Silent, manual_offset_management=True)
        r.executor.add(raws(0, 1), high_watermark=2)
        r.listener.run_jobs()
        assert r.executor.marked is None

    def test_consumer_lag_comes_from_the_high_watermark(self) -> None:
        """messages.consumer_lag counts what the partition holds after the batch."""
        lags: list[int | None] = []

        class Lagging(Consumer):
            def consume(self) -> None:
                lags.append(self.messages.consumer_lag)

        r = rig(Lagging, max_messages=2)
        r.executor.add(raws(0, 1, 2), high_watermark=10)
        r.listener.run_jobs()
        assert lags == [8, 7]

    def test_a_running_batch_is_visible_while_it_runs(self) -> None:
        """executor.running says which batch runs (for the snapshot), and clears after."""
        seen: list[Any] = []

        class Watching(Consumer):
            def consume(self) -> None:
                running = self._executor.running
                assert running is not None
                seen.append((running.first_offset, running.last_offset, running.count))

        r = rig(Watching)
        r.executor.add(raws(4, 5, 6), high_watermark=7)
        r.listener.run_jobs()
        assert seen == [(4, 6, 3)]
        assert r.executor.running is None

    def test_system_exit_keeps_the_batch_and_propagates(self) -> None:
        """A SystemExit in consume never lets the offset move past the batch."""

        class Exiting(Consumer):
            def consume(self) -> None:
                raise SystemExit(3)

        r = rig(Exiting)
        r.executor.add(raws(0, 1), high_watermark=2)
        with pytest.raises(SystemExit):
            r.listener.run_jobs()
        assert r.executor.marked is None
        assert [raw.offset() for raw in r.executor.pending] == [0, 1]


class TestRetries:
    def test_a_failure_holds_the_partition_and_retries_from_the_first_unmarked(self) -> None:
        """consume raising at offset 2 (0 and 1 marked): pause, then retry from 2."""
        consumer = recording(fail_at={2})
        r = rig(consumer)
        r.executor.add(raws(0, 1, 2, 3), high_watermark=4)
        r.listener.run_jobs()
        assert consumer.batches == [[0, 1, 2, 3]]
        assert r.executor.held
        assert r.executor.marked == 2
        assert [raw.offset() for raw in r.executor.pending] == [2, 3]
        assert r.timers.delays() == [1.0]
        consumer.fail_at.clear()
        assert r.timers.fire() == 1
        r.listener.run_jobs()
        assert consumer.batches[1] == [2, 3]
        assert r.executor.marked == 4
        assert r.executor.attempt == 0

    def test_the_pause_grows_exponentially_up_to_the_ceiling(self) -> None:
        """Each failed attempt doubles the pause: 1, 2, 4, 5 (pause_max_timeout 5)."""
        consumer = recording(fail_at={0})
        r = rig(consumer, app_settings=settings(pause_timeout=1.0, pause_max_timeout=5.0))
        r.executor.add(raws(0), high_watermark=1)
        for _ in range(4):
            r.listener.run_jobs()
            r.timers.fire()
        r.listener.run_jobs()
        assert r.timers.history == [1.0, 2.0, 4.0, 5.0, 5.0]

    def test_without_exponential_backoff_the_pause_stays(self) -> None:
        """pause_with_exponential_backoff=False on the route: the same pause every time."""
        consumer = recording(fail_at={0})
        r = rig(consumer, pause_timeout=0.5, pause_with_exponential_backoff=False)
        r.executor.add(raws(0), high_watermark=1)
        for _ in range(3):
            r.listener.run_jobs()
            r.timers.fire()
        assert r.timers.history == [0.5, 0.5, 0.5]

    def test_the_error_is_reported_with_attempt_and_action(self) -> None:
        """error.occurred carries the attempt number and what happens next."""
        consumer = recording(fail_at={0})
        r = rig(consumer)
        events: list[Any] = []
        r.monitor.subscribe("error.occurred", events.append)
        r.executor.add(raws(0), high_watermark=1)
        r.listener.run_jobs()
        r.timers.fire()
        r.listener.run_jobs()
        assert [(e["type"], e["attempt"], e["action"]) for e in events] == [
            ("consumer.consume.error", 1, "retry"),
            ("consumer.consume.error", 2, "retry"),
        ]

    def test_after_the_retries_the_message_goes_to_the_dlq_and_processing_goes_on(self) -> None:
        """max_retries=1: two failures at offset 1, then it is dispatched and 2 is processed."""
        consumer = recording(fail_at={1})
        r = rig(consumer, dead_letter_queue={"topic": "orders_dlq", "max_retries": 1})
        r.executor.add(raws(0, 1, 2), high_watermark=3)
        r.listener.run_jobs()
        r.timers.fire()
        r.listener.run_jobs()
        assert consumer.batches == [[0, 1, 2], [1, 2], [2]]
        assert r.producer.methods() == ["produce_async"]
        assert r.producer.calls[0][1]["topic"] == "orders_dlq"
        assert r.executor.marked == 3
        assert r.executor.attempt == 0
        assert not r.executor.held


class TestDeadLetterAcknowledgement:
    """The loss window: an asynchronously dispatched dead letter's offset is not committed
    before the broker acknowledged the copy, and a failed copy is sent again."""

    def dispatched(self) -> Any:
        consumer = recording(fail_at={1})
        r = rig(consumer, dead_letter_queue={"topic": "orders_dlq", "max_retries": 0})
        r.executor.add(raws(0, 1, 2, 3), high_watermark=4)
        r.listener.run_jobs()
        assert r.executor.marked == 4, "processing went on past the dead letter"
        return r

    def test_the_commit_stops_at_the_unacknowledged_copy(self) -> None:
        r = self.dispatched()
        assert r.executor.committable() == 1, "offset 1 is re-read if the app dies now"
        r.producer.handles[0].deliver()
        assert r.executor.committable() == 4

    def test_a_failed_copy_is_sent_again_after_the_back_off(self) -> None:
        r = self.dispatched()
        events: list[Any] = []
        r.monitor.subscribe("error.occurred", events.append)
        r.producer.handles[0].deliver(RuntimeError("broker down"))
        assert r.executor.committable() == 1
        assert [e["type"] for e in events] == ["consumer.copy.error"]
        assert r.timers.delays() == [1.0]
        r.timers.fire()
        assert [call[1]["topic"] for call in r.producer.calls] == ["orders_dlq", "orders_dlq"]
        r.producer.handles[1].deliver(RuntimeError("still down"))
        assert r.timers.delays() == [2.0], "the back-off grows"
        r.timers.fire()
        r.producer.handles[2].deliver()
        assert r.executor.committable() == 4

    def test_a_sync_mark_commits_no_further_than_the_copy(self) -> None:
        r = self.dispatched()
        assert r.executor.mark(4, sync=True) is False, "not committed as far as asked"
        assert r.listener.actions[-1] == ("commit", "orders", 0, 1)

    def test_after_revocation_a_failed_copy_is_left_to_the_next_owner(self) -> None:
        r = self.dispatched()
        r.executor.revoke()
        r.producer.handles[0].deliver(RuntimeError("broker down"))
        assert r.timers.delays() == []
        assert r.executor.committable() is None

    def test_shutdown_waits_for_copies_in_flight(self) -> None:
        r = self.dispatched()
        r.executor.stop()
        deadline = time.monotonic() + 0.05
        assert r.executor.wait_for_copies(deadline) is False
        threading.Timer(0.05, r.producer.handles[0].deliver).start()
        assert r.executor.wait_for_copies(time.monotonic() + 10) is True
        assert r.executor.committable() == 4

    def test_a_dispatch_that_cannot_be_sent_keeps_the_message_in_the_retry_path(self) -> None:
        """produce_sync failing: nothing is marked past the message, it is retried later."""
        consumer = recording(fail_at={1})
        r = rig(
            consumer,
            dead_letter_queue={
                "topic": "orders_dlq",
                "max_retries": 0,
                "dispatch_method": "produce_sync",
            },
        )
        r.producer.fail_with = RuntimeError("no broker")
        r.executor.add(raws(0, 1, 2), high_watermark=3)
        r.listener.run_jobs()
        assert r.executor.marked == 1
        assert r.executor.held
        assert [raw.offset() for raw in r.executor.pending] == [1, 2]
        assert r.crashes == []
        r.producer.fail_with = None
        r.timers.fire()
        r.listener.run_jobs()
        assert r.producer.methods() == ["produce_sync"]
        assert r.executor.marked == 3


class TestRevocation:
    def test_revoking_drops_pending_refuses_marks_and_runs_revoked(self) -> None:
        """A lost partition keeps nothing and commits nothing more."""
        revoked: list[int] = []

        class Orders(Consumer):
            def consume(self) -> None:
                return None

            def revoked(self) -> None:
                revoked.append(self.partition)

        r = rig(Orders, partition=3)
        r.executor.add(raws(0, partition=3), high_watermark=1)
        r.listener.run_jobs()
        r.executor.add(raws(1, partition=3), high_watermark=2)
        r.executor.revoke()
        assert not r.executor.pending
        assert r.executor.committable() is None
        assert r.executor.mark(5, sync=False) is False
        r.listener.run_jobs()
        assert revoked == [3]

    def test_a_sync_mark_after_the_loss_reports_false(self) -> None:
        """mark_as_consumed_sync tells the consumer it no longer owns the partition."""
        r = rig(recording(), listener=FakeListener(commit_result=False))
        assert r.executor.mark(1, sync=True) is False
        assert ("commit", "orders", 0, 1) in r.listener.actions

    def test_the_new_owner_waits_for_the_old_batch(self) -> None:
        """Revoked mid-batch and assigned back: the new executor starts only after the old
        batch ended, so two batches of one partition never overlap."""
        release_old = threading.Event()
        old_started = threading.Event()
        order: list[int] = []

        class Orders(Consumer):
            def consume(self) -> None:
                first = self.messages.first.offset
                if first == 0:
                    old_started.set()
                    release_old.wait(10)
                order.append(first)

        old = rig(Orders)
        old.executor.add(raws(0), high_watermark=1)
        worker = threading.Thread(target=old.listener.run_jobs)
        worker.start()
        assert old_started.wait(10)
        old.executor.revoke()
        new = PartitionExecutor(
            old.listener, old.executor.route, 0, old.executor.context, old.executor.policy,
            old.timers,
        )  # fmt: skip
        new.follow(old.executor)
        new.add(raws(1), high_watermark=2)
        assert new.held, "the new owner waits"
        assert not any(job.__self__ is new for job in old.listener.jobs)  # type: ignore[attr-defined]
        release_old.set()
        worker.join(10)
        old.listener.run_jobs()
        assert order == [0, 1]

    def test_no_wait_when_the_old_batch_is_already_over(self) -> None:
        """A predecessor with nothing running does not hold its successor."""
        r = rig(recording())
        r.executor.revoke()
        new = PartitionExecutor(
            r.listener, r.executor.route, 0, r.executor.context, r.executor.policy, r.timers
        )
        new.follow(r.executor)
        assert not new.held


class TestFlowControl:
    def test_pause_seeks_back_and_resume_releases(self) -> None:
        """pause() holds the partition, pauses fetching, seeks to the first unmarked message;
        resume() resumes fetching and processing."""
        calls: list[int] = []

        class Pausing(Consumer):
            def consume(self) -> None:
                calls.append(self.messages.first.offset)
                if len(calls) == 1:
                    self.mark_as_consumed(self.messages.first)
                    self.pause()

        r = rig(Pausing)
        r.executor.add(raws(0, 1, 2), high_watermark=3)
        r.listener.run_jobs()
        assert r.listener.actions == [("pause", "orders", 0), ("seek", "orders", 0, 1)]
        assert r.executor.held
        assert r.executor.marked == 1, "a paused batch is not marked past what was marked"
        r.executor.consumer.resume()  # type: ignore[union-attr]
        assert r.listener.actions[-1] == ("resume", "orders", 0)
        r.executor.add(raws(1, 2), high_watermark=3)
        r.listener.run_jobs()
        assert calls == [0, 1]

    def test_a_timed_pause_resumes_by_itself(self) -> None:
        """pause(timeout=...) schedules the resume."""

        class Pausing(Consumer):
            def consume(self) -> None:
                self.pause(offset=7, timeout=2.5)

        r = rig(Pausing)
        r.executor.add(raws(5), high_watermark=6)
        r.listener.run_jobs()
        assert r.timers.delays() == [2.5]
        assert ("seek", "orders", 0, 7) in r.listener.actions
        r.timers.fire()
        assert r.listener.actions[-1] == ("resume", "orders", 0)
        assert not r.executor.held

    def test_seek_drops_the_rest_of_the_batch(self) -> None:
        """seek() inside consume: the batch is not marked, pending is dropped."""

        class Seeking(Consumer):
            def consume(self) -> None:
                self.seek(0)

        r = rig(Seeking, max_messages=1)
        r.executor.add(raws(3, 4), high_watermark=5)
        r.listener.run_jobs()
        assert r.executor.marked is None
        assert ("seek", "orders", 0, 0) in r.listener.actions
        assert not r.executor.pending

    def test_a_large_backlog_throttles_then_resumes_fetching(self) -> None:
        """Past the high-water mark the listener hears of it; once drained below the low-water
        mark fetching resumes."""
        r = rig(recording(), max_messages=100)  # high water 2,000, low water 500
        r.executor.add(raws(*range(2_100)), high_watermark=2_100)
        assert r.executor in r.listener.over
        assert r.executor.throttle() is True
        assert r.executor.throttle() is False, "already throttled"
        r.listener.run_jobs()
        assert r.executor not in r.listener.over
        assert ("resume", "orders", 0) in r.listener.actions
        assert not r.executor.backpressure

    def test_a_backlog_drained_before_the_listener_throttles_is_not_paused(self) -> None:
        """The listener reads the over-limit set, then a worker drains the backlog (and sees
        no backpressure to lift), then the listener throttles: pausing now would never be
        resumed, since nothing is pending to take."""
        r = rig(recording(), max_messages=100)
        r.executor.add(raws(*range(2_100)), high_watermark=2_100)
        assert r.executor in r.listener.over
        r.listener.run_jobs()
        assert not r.executor.pending
        assert r.executor.throttle() is False
        assert not r.executor.backpressure

    def test_long_running_jobs_pause_fetching_while_they_run(self) -> None:
        """long_running_job: fetching stops when the job starts and resumes when it ends."""
        r = rig(recording(), long_running_job=True)
        r.executor.add(raws(0), high_watermark=1)
        r.listener.run_jobs()
        assert r.listener.actions == [("pause", "orders", 0), ("resume", "orders", 0)]

    def test_quiet_and_stop_take_no_new_batches(self) -> None:
        """hold() (quiet) keeps what is pending; stop() drops it; neither starts a job."""
        r = rig(recording())
        r.executor.hold()
        r.executor.add(raws(0), high_watermark=1)
        assert not r.listener.jobs
        assert len(r.executor.pending) == 1
        r.executor.stop()
        assert not r.executor.pending
        r.executor.add(raws(1), high_watermark=2)
        assert not r.listener.jobs

    @pytest.mark.parametrize("hook", ["reached_end", "eofed"])
    def test_eof_calls_the_end_hook_by_either_name_after_the_last_batch(self, hook: str) -> None:
        """Reaching the end of the partition runs reached_end() once nothing is pending; a
        consumer that overrides eofed() instead (Karafka's name, kept as an alias) gets it."""
        seen: list[str] = []
        orders = type("Orders", (Consumer,), {
            "consume": lambda self: seen.append("consume"), hook: lambda self: seen.append(hook),
        })  # fmt: skip
        r = rig(orders)
        events: list[Any] = []
        r.monitor.subscribe("consumer.eofed", events.append)
        r.executor.add(raws(0), high_watermark=1)
        r.executor.reached_eof()
        r.listener.run_jobs()
        assert seen == ["consume", hook]
        assert [event["partition"] for event in events] == [0], "Karafka's event name"

    def test_the_end_is_reached_after_a_tail_that_went_back_to_wait(self) -> None:
        """A batch taken at the end of the partition and cut short (a throttle holds its
        tail) does not reach the end: reached_end() runs once the tail is processed."""
        seen: list[Any] = []
        orders = type("Orders", (Consumer,), {
            "consume": lambda self: seen.append([m.offset for m in self.messages]),
            "reached_end": lambda self: seen.append("end"),
        })  # fmt: skip
        r = rig(orders, filters=[Throttle(2, per=60.0)])
        r.executor.add(raws(0, 1, 2, 3), high_watermark=4)
        r.executor.reached_eof()
        r.listener.run_jobs()
        assert seen == [[0, 1]], "2 and 3 wait: the end is not reached yet"
        assert r.executor.held
        cast(Throttle, r.executor.route.filters[0])._windows.clear()  # the interval is over
        r.timers.fire()
        r.listener.run_jobs()
        assert seen == [[0, 1], [2, 3], "end"]

    def test_a_seek_forgets_an_end_that_was_reached(self) -> None:
        """The end told before a seek is stale: librdkafka tells it again once read there."""
        seen: list[Any] = []
        orders = type("Orders", (Consumer,), {
            "consume": lambda self: seen.append([m.offset for m in self.messages]),
            "reached_end": lambda self: seen.append("end"),
        })  # fmt: skip
        r = rig(orders, filters=[Throttle(1, per=60.0)])
        r.executor.add(raws(0, 1), high_watermark=2)
        r.executor.reached_eof()
        r.listener.run_jobs()
        r.executor.discard_pending()  # the listener's side of a seek
        r.executor.add(raws(0), high_watermark=2)
        cast(Throttle, r.executor.route.filters[0])._windows.clear()
        r.timers.fire()
        r.listener.run_jobs()
        assert "end" not in seen

    def test_a_consumer_with_both_end_hooks_gets_reached_end_once(self) -> None:
        """reached_end() is the one the engine calls; eofed() runs only if it calls super()."""
        seen: list[str] = []

        class Orders(Consumer):
            def consume(self) -> None:
                return None

            def reached_end(self) -> None:
                seen.append("reached_end")

            def eofed(self) -> None:
                seen.append("eofed")

        r = rig(Orders)
        r.executor.add(raws(0), high_watermark=1)
        r.executor.reached_eof()
        r.listener.run_jobs()
        assert seen == ["reached_end"]

    def test_an_end_hook_that_raises_is_reported_under_karafkas_name(self) -> None:
        class Orders(Consumer):
            def consume(self) -> None:
                return None

            def eofed(self) -> None:
                raise RuntimeError("end")

        r = rig(Orders)
        errors: list[Any] = []
        r.monitor.subscribe("error.occurred", errors.append)
        r.executor.add(raws(0), high_watermark=1)
        r.executor.reached_eof()
        r.listener.run_jobs()
        assert [(e["type"], str(e["error"])) for e in errors] == [("consumer.eofed.error", "end")]

    def test_tick_runs_only_when_idle(self) -> None:
        """tick() is skipped while messages are pending."""
        ticks: list[int] = []

        class Ticking(Consumer):
            def consume(self) -> None:
                return None

            def tick(self) -> None:
                ticks.append(1)

        r = rig(Ticking)
        r.executor.add(raws(0), high_watermark=1)
        r.executor.tick()
        r.listener.run_jobs()
        r.executor.tick()
        r.listener.run_jobs()
        assert ticks == [1]
