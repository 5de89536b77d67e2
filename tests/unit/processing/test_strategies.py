"""The failure policy of a topic, driven with fakes: back-off, retries, independent counting,
strategies, dispatch (sync, async, transactional), marking (async, sync) and skipping."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import ConfigurationError, Consumer, Message, Monitor
from conveyor.messages import Deserializers
from conveyor.processing.strategies import Backoff, FailurePolicy
from conveyor.routing.dead_letter_queue import parse_dead_letter_queue
from unit.processing.fakes import FakeProducer, FakeRaw, route, settings

ERROR = RuntimeError("boom")


class Noop(Consumer):
    def consume(self) -> None:
        return None


class Partition:
    """The policy's view of a partition (PartitionActions), recording marks."""

    topic = "orders"
    partition = 2
    group_id = "billing"

    def __init__(self) -> None:
        self.marks: list[tuple[int, bool]] = []
        self.enhanced: list[int] = []
        self.held: list[tuple[int, Any]] = []

    def send_held(self, offset: int, message: dict[str, Any], producer: Any) -> Any:
        handle = producer.produce_async(**message)
        self.held.append((offset, handle))
        return handle

    def mark(self, next_offset: int, sync: bool) -> bool:
        self.marks.append((next_offset, sync))
        return True

    def group_metadata(self) -> Any:
        return "metadata"

    def enhance_dlq_message(self, dlq_message: dict[str, Any], message: Message) -> dict[str, Any]:
        self.enhanced.append(message.offset)
        return {**dlq_message, "headers": [*dlq_message["headers"], ("reason", "enhanced")]}


def policy(
    dlq: dict[str, Any] | None = None, **backoff: Any
) -> tuple[FailurePolicy, FakeProducer, FakeProducer, Monitor]:
    producer, transactional = FakeProducer(), FakeProducer()
    monitor = Monitor()
    options = {"timeout": 1.0, "max_timeout": 30.0, "exponential": True, **backoff}
    return (
        FailurePolicy(
            "orders",
            parse_dead_letter_queue("orders", dlq),
            Backoff(options["timeout"], options["max_timeout"], options["exponential"]),
            monitor,
            lambda: producer,
            lambda: transactional,
        ),
        producer,
        transactional,
        monitor,
    )


def message(offset: int = 7) -> Message:
    raw = FakeRaw(offset, partition=2, value=b'{"n":1}', key=b"k", headers=[("trace", b"t1")])
    return Message(raw, Deserializers())


def actions(p: FailurePolicy, failures: int, error: BaseException = ERROR) -> list[str]:
    """The actions for ``failures`` failures in a row with no progress in between."""
    attempt, answered = 0, []
    for _ in range(failures):
        verdict = p.failed(error, attempt, progressed=False)
        attempt = verdict.attempt
        answered.append(verdict.action)
    return answered


class TestBackoff:
    def test_doubles_up_to_the_ceiling(self) -> None:
        """1 s doubling, capped at pause_max_timeout."""
        backoff = Backoff(1.0, 5.0, exponential=True)
        assert [backoff.delay(attempt) for attempt in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]

    def test_constant_without_exponential(self) -> None:
        backoff = Backoff(0.5, 5.0, exponential=False)
        assert {backoff.delay(attempt) for attempt in range(1, 6)} == {0.5}

    def test_route_options_override_the_app(self) -> None:
        """pause_* on the route win; what the route leaves out comes from the app."""
        app = settings(pause_timeout=2.0, pause_max_timeout=60.0)
        topic = route(Noop, pause_timeout=0.25, pause_with_exponential_backoff=False)
        backoff = Backoff.for_route(topic, app)
        assert (backoff.timeout, backoff.max_timeout, backoff.exponential) == (0.25, 60.0, False)
        inherited = Backoff.for_route(route(Noop), app)
        assert (inherited.timeout, inherited.max_timeout, inherited.exponential) == (
            2.0,
            60.0,
            True,
        )


class TestDecisions:
    def test_without_a_dead_letter_queue_it_retries_forever(self) -> None:
        p, *_ = policy()
        assert actions(p, 10) == ["retry"] * 10

    def test_the_delay_follows_the_attempts(self) -> None:
        p, *_ = policy(timeout=1.0, max_timeout=8.0)
        attempt, delays = 0, []
        for _ in range(5):
            verdict = p.failed(ERROR, attempt, progressed=False)
            attempt = verdict.attempt
            delays.append(verdict.delay)
        assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]

    @pytest.mark.parametrize("retries", [0, 1, 3])
    def test_max_retries_then_dispatch(self, retries: int) -> None:
        """max_retries retries, then the message goes to the DLQ."""
        p, *_ = policy({"topic": "orders_dlq", "max_retries": retries})
        assert actions(p, retries + 1) == ["retry"] * retries + ["dispatch"]

    def test_topic_false_skips_after_the_retries(self) -> None:
        p, *_ = policy({"topic": False, "max_retries": 2})
        assert actions(p, 3) == ["retry", "retry", "skip"]

    def test_the_default_is_three_retries(self) -> None:
        p, *_ = policy({"topic": "orders_dlq"})
        assert actions(p, 4) == ["retry", "retry", "retry", "dispatch"]

    def test_counting_goes_on_across_messages_unless_independent(self) -> None:
        """After progress since the last failure: the shared count goes on; independent starts
        over (each message gets its own retries)."""
        shared, *_ = policy({"topic": "dlq", "max_retries": 1})
        first = shared.failed(ERROR, 0, progressed=False)
        assert (first.attempt, first.action) == (1, "retry")
        after_progress = shared.failed(ERROR, first.attempt, progressed=True)
        assert (after_progress.attempt, after_progress.action) == (2, "dispatch")

        independent, *_ = policy({"topic": "dlq", "max_retries": 1, "independent": True})
        first = independent.failed(ERROR, 0, progressed=False)
        after_progress = independent.failed(ERROR, first.attempt, progressed=True)
        assert (after_progress.attempt, after_progress.action) == (1, "retry")
        without_progress = independent.failed(ERROR, after_progress.attempt, progressed=False)
        assert (without_progress.attempt, without_progress.action) == (2, "dispatch")

    def test_a_strategy_decides_per_error(self) -> None:
        def strategy(error: BaseException, attempt: int) -> str:
            return (
                "dispatch"
                if isinstance(error, ValueError)
                else ("retry" if attempt < 3 else "skip")
            )

        p, *_ = policy({"topic": "dlq", "strategy": strategy})
        assert actions(p, 1, ValueError("bad json")) == ["dispatch"]
        assert actions(p, 3, TimeoutError()) == ["retry", "retry", "skip"]

    def test_a_strategy_dispatching_without_a_topic_skips(self) -> None:
        p, *_ = policy({"topic": False, "strategy": lambda error, attempt: "dispatch"})
        assert actions(p, 1) == ["skip"]

    def test_a_strategy_answering_nonsense_is_named(self) -> None:
        p, *_ = policy({"topic": "dlq", "strategy": lambda error, attempt: "maybe"})
        with pytest.raises(ConfigurationError, match="maybe") as raised:
            p.failed(ERROR, 0, progressed=False)
        assert raised.value.setting == "strategy"


class TestDispatch:
    def test_async_dispatch_then_async_mark_by_default(self) -> None:
        """produce_async to the DLQ topic, then mark_as_consumed (not sync)."""
        p, producer, transactional, _ = policy({"topic": "orders_dlq"})
        partition = Partition()
        p.give_up(message(7), ERROR, 4, "dispatch", partition)
        assert producer.methods() == ["produce_async"]
        assert transactional.calls == []
        assert partition.marks == [(8, False)]
        assert partition.held == [(7, producer.handles[0])], "commits wait for the copy's ack"

    def test_sync_dispatch_and_sync_marking(self) -> None:
        p, producer, _, _ = policy(
            {
                "topic": "orders_dlq",
                "dispatch_method": "produce_sync",
                "marking_method": "mark_as_consumed_sync",
            }
        )
        partition = Partition()
        p.give_up(message(7), ERROR, 4, "dispatch", partition)
        assert producer.methods() == ["produce_sync"]
        assert partition.marks == [(8, True)]

    def test_transactional_dispatch_sends_the_offset_in_the_transaction(self) -> None:
        """The DLQ copy and the offset past it go through one transaction; the plain producer
        is not used."""
        p, producer, transactional, _ = policy({"topic": "orders_dlq", "transactional": True})
        partition = Partition()
        p.give_up(message(7), ERROR, 4, "dispatch", partition)
        assert producer.calls == []
        assert transactional.methods() == ["begin", "produce_async", "send_offsets", "commit"]
        assert transactional.calls[2][1:] == ([("orders", 2, 8)], "metadata")
        assert partition.marks == [(8, False)]

    def test_a_failed_transaction_marks_nothing(self) -> None:
        p, _, transactional, _ = policy({"topic": "orders_dlq", "transactional": True})
        transactional.fail_with = RuntimeError("broker refused")
        partition = Partition()
        with pytest.raises(RuntimeError):
            p.give_up(message(7), ERROR, 4, "dispatch", partition)
        assert transactional.methods() == ["begin", "abort"]
        assert partition.marks == []

    def test_the_dead_letter_copy_carries_the_original_and_the_error(self) -> None:
        """Payload, key and headers kept; original_* headers; the consumer's enhancement applied."""
        p, producer, _, _ = policy({"topic": "orders_dlq"})
        partition = Partition()
        p.give_up(message(7), ValueError("bad json"), 3, "dispatch", partition)
        sent = producer.calls[0][1]
        headers = dict(sent["headers"])
        assert (sent["topic"], sent["payload"], sent["key"]) == ("orders_dlq", b'{"n":1}', b"k")
        assert headers["trace"] == b"t1"
        assert headers["original_topic"] == "orders"
        assert headers["original_partition"] == "2"
        assert headers["original_offset"] == "7"
        assert headers["original_key"] == b"k"
        assert headers["original_consumer_group"] == "billing"
        assert headers["original_attempts"] == "3"
        assert headers["original_error_class"] == "ValueError"
        assert headers["original_error_message"] == "bad json"
        assert headers["reason"] == "enhanced"
        assert partition.enhanced == [7]

    def test_dispatch_emits_its_event(self) -> None:
        p, _, _, monitor = policy({"topic": "orders_dlq"})
        events: list[Any] = []
        monitor.subscribe("dead_letter_queue.dispatched", events.append)
        p.give_up(message(7), ERROR, 4, "dispatch", Partition())
        assert [(e["offset"], e["dlq_topic"], e["attempts"]) for e in events] == [
            (7, "orders_dlq", 4)
        ]


class TestSkip:
    @pytest.mark.parametrize(
        ("marking", "sync"), [("mark_as_consumed", False), ("mark_as_consumed_sync", True)]
    )
    def test_skipping_marks_as_configured_and_produces_nothing(
        self, marking: str, sync: bool
    ) -> None:
        p, producer, transactional, monitor = policy({"topic": False, "marking_method": marking})
        events: list[Any] = []
        monitor.subscribe("dead_letter_queue.skipped", events.append)
        partition = Partition()
        p.give_up(message(7), ERROR, 2, "skip", partition)
        assert producer.calls == []
        assert transactional.calls == []
        assert partition.marks == [(8, sync)]
        assert [(e["offset"], e["attempts"]) for e in events] == [(7, 2)]

    def test_a_strategy_can_skip_even_with_a_topic(self) -> None:
        p, producer, _, _ = policy({"topic": "orders_dlq"})
        partition = Partition()
        p.give_up(message(7), ERROR, 1, "skip", partition)
        assert producer.calls == []
        assert partition.marks == [(8, False)]
