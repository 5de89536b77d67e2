"""A message that keeps failing goes to the dead letter queue after exactly max_retries retries,
with its original payload, key, headers and original_* headers; nothing else is lost,
duplicated or blocked."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from conveyor import Admin, App, Consumer, Message, Producer
from helpers import Record, running


def make_app(bootstrap: str) -> App:
    return App(
        client_id="dlq-test",
        kafka={"bootstrap.servers": bootstrap, "group.id": f"dlq-{uuid.uuid4().hex[:8]}"},
        max_wait_time=0.2,
        pause_timeout=0.05,
        pause_max_timeout=0.2,
    )


def test_a_poison_message_lands_in_the_dlq_after_exactly_max_retries(
    kafka_bootstrap: str, new_topic, read_messages, kafka_admin: Admin
) -> None:
    topic = new_topic(partitions=3)
    dlq = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "payload": {"n": n}, "partition": n % 3, "key": f"k{n}",
                 **({"headers": [("trace", "poison")]} if n == 4_000 else {})}
                for n in range(10_000)
            ]
        )  # fmt: skip
    record = Record()
    attempts: list[tuple[int, bool]] = []

    class Strict(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.payload["n"] == 4_000:
                    attempts.append((self.attempt, self.retrying))
                    raise ValueError("cannot handle order 4000")
                record.add((message.partition, message.offset))
                self.mark_as_consumed(message)

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Strict, dead_letter_queue={"topic": dlq, "max_retries": 2})
    errors: list[Any] = []
    app.monitor.subscribe(
        "error.occurred", lambda event: errors.append((event.get("partition"), event.get("action")))
    )
    with running(app):
        assert record.wait_for(lambda items: len(items) >= 9_999)
    assert attempts == [(1, False), (2, True), (3, True)], "two retries, then the DLQ"
    assert len(record.items) == 9_999 == len(set(record.items)), "every other message once"
    by_partition: dict[int, list[int]] = {}
    for partition, offset in record.items:
        by_partition.setdefault(partition, []).append(offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())
    poison_partition = 4_000 % 3
    assert {partition for partition, _ in errors} == {poison_partition}, (
        "other partitions never failed"
    )
    assert [action for _, action in errors] == ["retry", "retry", "dispatch"]

    [moved] = read_messages(dlq, 1)
    assert kafka_admin.read_watermark_offsets(dlq, 0) == (0, 1), "exactly one copy"
    headers = dict(moved.headers())
    assert moved.value() == b'{"n":4000}'
    assert moved.key() == b"k4000"
    assert headers["trace"] == b"poison"
    assert headers["original_topic"] == topic.encode()
    assert headers["original_partition"] == str(poison_partition).encode()
    assert int(headers["original_offset"]) == 4_000 // 3
    assert headers["original_key"] == b"k4000"
    assert int(headers["original_timestamp"]) > 0
    assert headers["original_consumer_group"].startswith(b"dlq-")
    assert headers["original_attempts"] == b"3"
    assert headers["original_error_class"] == b"ValueError"
    assert headers["original_error_message"] == b"cannot handle order 4000"
    assert b"Traceback" in headers["original_error_backtrace"]


def test_a_malformed_payload_follows_the_same_path(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()
    dlq = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": p} for p in (b'{"n": 0}', b"{not json", b'{"n": 2}')]
        )
    record = Record()

    class Reader(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                record.add(message.payload["n"])
                self.mark_as_consumed(message)

    app = make_app(kafka_bootstrap)
    decisions: list[tuple[str, int]] = []

    def dispatch_bad_json_at_once(error: BaseException, attempt: int) -> str:
        decisions.append((type(error).__name__, attempt))
        return "dispatch" if isinstance(error, ValueError) else "retry"

    app.routes.topic(
        topic, Reader, dead_letter_queue={"topic": dlq, "strategy": dispatch_bad_json_at_once}
    )
    with running(app):
        assert record.wait_for(lambda items: 2 in items)
    assert record.items == [0, 2]
    assert len(decisions) == 1
    assert decisions[0][1] == 1
    [moved] = read_messages(dlq, 1)
    assert moved.value() == b"{not json"


def committed_offset(bootstrap: str, group: str, topic: str) -> int | None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        lags = [lag for lag in admin.read_lags([group]) if lag.topic == topic]
    return lags[0].committed if lags else None


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"dispatch_method": "produce_sync", "marking_method": "mark_as_consumed_sync"},
        {"transactional": True},
        {"independent": True},
    ],
    ids=["async-default", "sync-dispatch-and-marking", "transactional", "independent"],
)
def test_dispatch_variants(
    kafka_bootstrap: str, new_topic, read_messages, options: dict[str, Any]
) -> None:
    """Each way of dispatching, told apart by what only it does, with periodic commits off:

    - sync dispatch sends with ``produce_sync`` and sync marking commits at once;
    - transactional dispatch commits the offset in the transaction (and its commit marker
      takes an offset of the DLQ topic: two, not one);
    - non-independent retries are counted per partition: 4 fails once (the earlier failure
      of 2 used up the retry), independent ones per message: 4 fails twice."""
    topic = new_topic()
    dlq = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        # One burst, read back as one fetch: 2 and 4 end up in the same retried batch.
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in range(6)])
    record = Record()
    failures = {2: 0, 4: 0}

    class Picky(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                n = message.payload["n"]
                if n == 4 or (n == 2 and failures[2] < 1):
                    failures[n] += 1  # 2 fails once then passes; 4 always fails
                    raise RuntimeError(f"bad {n}")
                record.add(n)
                self.mark_as_consumed(message)

    group = f"dlq-{uuid.uuid4().hex[:8]}"
    app = App(
        client_id="dlq-test",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
               "auto.commit.interval.ms": 600_000},  # only the DLQ path commits while it runs
        max_wait_time=0.2, pause_timeout=0.05, pause_max_timeout=0.2,
    )  # fmt: skip
    app.routes.topic(topic, Picky, dead_letter_queue={"topic": dlq, "max_retries": 1, **options})
    sent_sync: list[str] = []
    app.monitor.subscribe(
        "message.produced_sync", lambda event: sent_sync.append(event["report"].topic)
    )
    with running(app):
        assert record.wait_for(lambda items: 5 in items)
        # A transactional commit of the offset reaches the group a moment after the
        # transaction ends (its markers written): asked at once, the group may not have it yet.
        deadline = time.monotonic() + 10
        committed_while_running = committed_offset(kafka_bootstrap, group, topic)
        while committed_while_running is None and time.monotonic() < deadline:
            threading.Event().wait(0.1)  # asking the broker again, bounded by the deadline
            committed_while_running = committed_offset(kafka_bootstrap, group, topic)
    assert record.items == [0, 1, 2, 3, 5]
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        dlq_end = admin.read_watermark_offsets(dlq, 0)[1]
    isolation = {"isolation.level": "read_committed"} if options.get("transactional") else {}
    moved = read_messages(dlq, 1, timeout=10, **isolation)
    assert [m.value() for m in moved] == [b'{"n":4}']
    assert committed_offset(kafka_bootstrap, group, topic) == 6, "all committed at the stop"
    if options.get("transactional"):
        assert dlq_end == 2, "the copy and the transaction's commit marker"
        assert committed_while_running == 5, "the offset went with the transaction"
    else:
        assert dlq_end == 1, "exactly one copy"
    if options.get("marking_method") == "mark_as_consumed_sync":
        assert sent_sync == [dlq], "the copy went with produce_sync"
        assert committed_while_running == 5, "marked and committed at once"
    else:
        assert sent_sync == []
    if not options:
        assert committed_while_running is None, "nothing committed before the interval"
    assert failures[4] == (2 if options.get("independent") else 1)


def test_topic_false_skips_after_the_retries(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in range(3)])
    record = Record()
    skipped: list[int] = []

    class Skipping(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.payload["n"] == 1:
                    raise RuntimeError("never")
                record.add(message.payload["n"])
                self.mark_as_consumed(message)

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Skipping, dead_letter_queue={"topic": False, "max_retries": 1})
    app.monitor.subscribe(
        "dead_letter_queue.skipped", lambda event: skipped.append(event["offset"])
    )
    with running(app):
        assert record.wait_for(lambda items: 2 in items)
    assert record.items == [0, 2]
    assert skipped == [1]


def test_dispatch_to_dlq_and_enhance(kafka_bootstrap: str, new_topic, read_messages) -> None:
    topic = new_topic()
    dlq = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in range(3)])
    record = Record()

    class Sorting(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.payload["n"] == 1:
                    self.dispatch_to_dlq(message)
                else:
                    record.add(message.payload["n"])
                    self.mark_as_consumed(message)

        def enhance_dlq_message(
            self, dlq_message: dict[str, Any], skippable_message: Message
        ) -> dict[str, Any]:
            return {**dlq_message, "headers": [*dlq_message["headers"], ("reason", "sorted out")]}

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Sorting, dead_letter_queue={"topic": dlq})
    with running(app):
        assert record.wait_for(lambda items: 2 in items)
    [moved] = read_messages(dlq, 1)
    assert dict(moved.headers())["reason"] == b"sorted out"
    assert moved.value() == b'{"n":1}'
