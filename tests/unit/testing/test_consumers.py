"""conveyor.testing: a route's consumer built, fed, run and watched without a broker."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from conveyor import App, Consumer, testing
from conveyor.errors import (
    ConfigurationError,
    DeserializationError,
    InvalidMessageError,
    TransactionError,
)
from conveyor.messages import Deserializers


class Recording(Consumer):
    """Keeps what it saw; a payload ``{"do": ...}`` makes it act on its partition."""

    seen: ClassVar[list[Any]] = []

    def consume(self) -> None:
        for message in self.messages:
            Recording.seen.append((message.offset, message.key, message.payload, message.headers))
            action = message.payload.get("do") if isinstance(message.payload, dict) else None
            if action == "pause":
                self.pause(message.offset + 1, 5.0)
            elif action == "resume":
                self.resume()
            elif action == "seek":
                self.seek(0)
            elif action == "mark_sync":
                self.mark_as_consumed_sync(message)
            elif action == "fail":
                raise RuntimeError("asked to fail")


def new_app(**route: Any) -> App:
    Recording.seen = []
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("events", Recording, **route)
    return app


def test_fed_messages_reach_consume_decoded_by_the_route_with_offsets_in_order() -> None:
    app = new_app()
    consumer = testing.consumer_for(app, "events")
    testing.produce(consumer, {"n": 1}, key="k", headers={"h": "v"})
    testing.produce(consumer, b'{"n": 2}', headers=[("h", b"1"), ("h", b"2")])
    testing.produce(consumer, "text is sent as UTF-8", offset=10)
    with pytest.raises(DeserializationError):  # not JSON: the route's deserializer says so
        testing.consume(consumer)
    assert [(offset, key) for offset, key, _, _ in Recording.seen] == [(0, "k"), (1, None)]
    assert Recording.seen[0][2:] == ({"n": 1}, {"h": b"v"})
    assert Recording.seen[1][3] == {"h": b"2"}, "the last of a repeated header wins"
    assert [m.offset for m in consumer.messages] == [0, 1, 10]
    assert testing.recorded(consumer).committed is None


def test_a_route_s_own_deserializers_are_used() -> None:
    app = new_app(deserializers=Deserializers(payload=lambda raw: raw.decode().upper()))
    consumer = testing.consumer_for(app, "events")
    message = testing.produce(consumer, "shout")
    assert message.raw_payload == b"shout"
    testing.consume(consumer)
    assert Recording.seen[0][2] == "SHOUT"


def test_consume_marks_the_batch_and_starts_a_new_one() -> None:
    app = new_app()
    consumer = testing.consumer_for(app, "events")
    testing.produce(consumer, {"n": 1})
    testing.produce(consumer, {"n": 2})
    testing.consume(consumer)
    testing.produce(consumer, {"n": 3})
    testing.consume(consumer)
    assert [mark.offset for mark in testing.recorded(consumer).marks] == [2, 3]
    assert [offset for offset, *_ in Recording.seen] == [0, 1, 2]
    with pytest.raises(ConfigurationError, match="nothing to consume"):
        testing.consume(consumer)


def test_manual_offset_management_marks_only_what_the_consumer_marks() -> None:
    app = new_app(manual_offset_management=True)
    consumer = testing.consumer_for(app, "events")
    testing.produce(consumer, {"do": "mark_sync"})
    testing.produce(consumer, {"n": 2})
    testing.consume(consumer)
    assert testing.recorded(consumer).marks == [testing.Mark(1, sync=True)]


def test_a_failing_batch_stays_and_running_it_again_is_the_retry() -> None:
    app = new_app()
    consumer = testing.consumer_for(app, "events")
    testing.produce(consumer, {"do": "fail"})
    for attempt in (1, 2):
        with pytest.raises(RuntimeError, match="asked to fail"):
            testing.consume(consumer)
        assert consumer.attempt == attempt + 1
    assert consumer.retrying
    assert testing.recorded(consumer).marks == []
    assert len(consumer.messages) == 1


def test_pause_resume_and_seek_are_recorded() -> None:
    app = new_app()
    consumer = testing.consumer_for(app, "events")
    for action in ("pause", "resume", "seek"):
        testing.produce(consumer, {"do": action})
    testing.consume(consumer)
    recorded = testing.recorded(consumer)
    assert recorded.pauses == [testing.Pause(1, 5.0)]
    assert recorded.resumes == 1
    assert recorded.seeks == [0]


class ToDeadLetters(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            self.dispatch_to_dlq(message, ValueError("no good"))

    def enhance_dlq_message(self, dlq_message: dict[str, Any], skippable_message: Any) -> None:
        dlq_message["headers"].append(("enhanced", b"yes"))


def test_a_dead_letter_is_produced_with_where_it_came_from_and_marked() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", ToDeadLetters, dead_letter_queue={"topic": "in-dlq"})
    consumer = testing.consumer_for(app, "in", partition=2)
    testing.produce(consumer, {"a": 1}, key="k")
    testing.consume(consumer)
    [letter] = testing.produced(app, "in-dlq")
    assert (letter.key, letter.payload) == ("k", {"a": 1})
    headers = letter.headers
    assert headers["original_topic"] == b"in"
    assert headers["original_partition"] == b"2"
    assert headers["original_error_class"] == b"ValueError"
    assert headers["enhanced"] == b"yes"
    recorded = testing.recorded(consumer)
    assert [d.topic for d in recorded.dead_letters] == ["in-dlq"]
    assert recorded.committed == 1


class Transform(Consumer):
    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                self.produce_async(topic="out", payload={"double": message.payload * 2})
                self.mark_as_consumed(message)
            if message.payload < 0:
                raise ValueError("negative")


def test_transactions_commit_messages_with_offsets_or_abort_both() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", Transform, manual_offset_management=True)
    consumer = testing.consumer_for(app, "in")
    testing.produce(consumer, 2)
    testing.consume(consumer)
    assert [m.payload for m in testing.produced(app, "out")] == [{"double": 4}]
    captured = testing.capture(app)
    assert captured.offsets == [("in", 0, 1)]
    assert testing.recorded(consumer).transactional

    testing.produce(consumer, -1)
    with pytest.raises(ValueError, match="negative"):
        testing.consume(consumer)
    assert [m.payload for m in testing.produced(app, "out")] == [{"double": 4}]
    assert [r.value() for r in captured.aborted] == [b'{"double":-2}']
    assert captured.offsets == [("in", 0, 1)]


class CopiesWithoutMarking(Consumer):
    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                self.produce_async(topic="out", payload=message.payload)


class RevokedInside(Consumer):
    marked: ClassVar[list[bool]] = []

    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                self.produce_async(topic="out", payload=message.payload)
            testing.revoke(self)  # a rebalance while the block runs
            RevokedInside.marked.append(self.mark_as_consumed(self.messages.last))


@pytest.mark.parametrize("consumer_class", [CopiesWithoutMarking, RevokedInside])
def test_a_transaction_without_its_offset_aborts_and_commits_no_output(
    consumer_class: type[Consumer],
) -> None:
    """The exactly-once invariant: outputs commit with their input's offset or not at all (a
    transaction that committed outputs but no offset let a partition through twice)."""
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", consumer_class, manual_offset_management=True)
    captured = testing.capture(app)
    consumer = testing.consumer_for(app, "in")
    testing.produce(consumer, 7)
    expected = "revoked" if consumer_class is RevokedInside else "marked no offset"
    with pytest.raises(TransactionError, match=expected):
        testing.consume(consumer)
    assert testing.produced(app, "out") == []
    assert [r.value() for r in captured.aborted] == [b"7"]
    assert captured.offsets == []
    if consumer_class is RevokedInside:
        assert RevokedInside.marked == [False]


class Keyed(Consumer):
    def consume(self) -> None:
        self.produce_many_sync(
            [{"topic": "out", "payload": m.raw_payload, "key": m.raw_key} for m in self.messages]
        )
        report = self.produce_sync(topic="out", payload=b"x", partition_key="pk")
        Keyed.report = report

    report: ClassVar[Any] = None


def test_keys_land_where_the_producer_s_partitioner_puts_them() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", Keyed)
    testing.capture(app, partitions={"out": 4})
    consumer = testing.consumer_for(app, "in")
    for key in ("a", "b", "a", "c", "a"):
        testing.produce(consumer, b"p", key=key)
    testing.consume(consumer)
    out = testing.produced(app, "out")
    by_key: dict[str, set[int]] = {}
    for message in out[:5]:
        by_key.setdefault(message.key, set()).add(message.partition)
    assert all(len(partitions) == 1 for partitions in by_key.values()), by_key
    assert {p for ps in by_key.values() for p in ps} <= {0, 1, 2, 3}
    a_offsets = [m.offset for m in out[:5] if m.key == "a"]
    assert a_offsets == sorted(a_offsets)
    assert len(set(a_offsets)) == 3
    assert Keyed.report.topic == "out"
    assert 0 <= Keyed.report.partition < 4


def test_an_unknown_partition_is_refused_like_kafka_would() -> None:
    app = new_app()
    testing.capture(app)
    with pytest.raises(Exception, match=re.escape("'elsewhere' has 1 partition(s) here")):
        app.producer.produce_sync(topic="elsewhere", payload=b"x", partition=3)
    with pytest.raises(InvalidMessageError):  # the producer's own checks still apply
        app.producer.produce_sync(topic="", payload=b"x")
    assert testing.produced(app) == []


def test_the_producer_s_middleware_applies_to_what_is_captured() -> None:
    app = new_app()
    testing.capture(app)
    app.producer.middleware.append(lambda m: {**m, "headers": [("stamped", b"1")]})
    app.producer.produce_sync(topic="events", payload={"n": 1})
    [message] = testing.produced(app)
    assert message.headers == {"stamped": b"1"}
    testing.clear(app)
    assert testing.produced(app) == []


class Revocable(Consumer):
    revoked_seen: ClassVar[bool] = False

    def consume(self) -> None:
        Revocable.marked = self.mark_as_consumed(self.messages.last)

    def revoked(self) -> None:
        Revocable.revoked_seen = True

    marked: ClassVar[bool] = True


def test_a_revoked_partition_refuses_marks_and_runs_the_hook() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", Revocable)
    consumer = testing.consumer_for(app, "in")
    testing.revoke(consumer)
    assert consumer.is_revoked()
    assert Revocable.revoked_seen
    testing.produce(consumer, b"x")
    testing.consume(consumer)
    assert Revocable.marked is False
    assert testing.recorded(consumer).marks == []


class Waiting(Consumer):
    done: ClassVar[list[int]] = []

    async def consume(self) -> None:
        import asyncio  # noqa: PLC0415

        await asyncio.sleep(0)
        Waiting.done.extend(m.offset for m in self.messages)


def test_an_async_consumer_runs_on_an_event_loop() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", Waiting)
    consumer = testing.consumer_for(app, "in")
    testing.produce(consumer, b"1")
    testing.consume(consumer)
    assert Waiting.done == [0]


def test_bad_use_is_told_clearly() -> None:
    app = new_app()
    with pytest.raises(ConfigurationError, match=r"does not consume 'nope' \(its routes: events\)"):
        testing.consumer_for(app, "nope")
    with app.routes.consumer_group("other"):
        app.routes.topic("events", Recording)
    with pytest.raises(ConfigurationError, match="more than one consumer group"):
        testing.consumer_for(app, "events")
    consumer = testing.consumer_for(app, "events", consumer_group="other")
    assert consumer.route.consumer_group == "other"
    testing.produce(consumer, b"x")
    with pytest.raises(ConfigurationError, match="holds messages of partition 0"):
        testing.produce(consumer, b"y", partition=1)
    with pytest.raises(ConfigurationError, match="not past the last"):
        testing.produce(consumer, b"y", offset=0)
    with pytest.raises(ConfigurationError, match="consumer_for"):
        testing.produce(Recording(), b"x")
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    assert testing.produce(consumer, b"z", timestamp=stamp).timestamp == stamp


class TransformOnTheLoop(Consumer):
    async def consume(self) -> None:
        async with self.transaction() as producer:
            for message in self.messages:
                await producer.produce_async(topic="out", payload={"double": message.payload * 2})
                self.mark_as_consumed(message)
            if message.payload < 0:
                raise ValueError("negative")


class ThreadBlockOnTheLoop(Consumer):
    async def consume(self) -> None:
        with self.transaction():
            pass


def test_an_async_consumer_commits_with_async_with_and_is_told_when_it_uses_with() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("in", TransformOnTheLoop, manual_offset_management=True)
    app.routes.topic("plain", ThreadBlockOnTheLoop)
    consumer = testing.consumer_for(app, "in")
    testing.produce(consumer, 2)
    testing.consume(consumer)
    assert [m.payload for m in testing.produced(app, "out")] == [{"double": 4}]
    captured = testing.capture(app)
    assert captured.offsets == [("in", 0, 1)]

    testing.produce(consumer, -1)
    with pytest.raises(ValueError, match="negative"):
        testing.consume(consumer)
    assert [m.payload for m in testing.produced(app, "out")] == [{"double": 4}]
    assert [r.value() for r in captured.aborted] == [b'{"double":-2}']
    assert captured.offsets == [("in", 0, 1)]

    plain = testing.consumer_for(app, "plain")
    testing.produce(plain, 1)
    with pytest.raises(ConfigurationError, match=r"async with self\.transaction\(\)"):
        testing.consume(plain)


def test_offset_metadata_is_recorded_with_marks_and_read_back() -> None:
    """Marks keep their metadata; ``offset_metadata`` is the committed one (settable on the
    partition) until a mark gives its own."""
    read: list[str | None] = []

    class Cursor(Consumer):
        def consume(self) -> None:
            read.append(self.offset_metadata)
            self.mark_as_consumed(
                self.messages.last, metadata=f"next={self.messages.last.offset + 1}"
            )
            read.append(self.offset_metadata)

    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("events", Cursor, manual_offset_management=True)
    consumer = testing.consumer_for(app, "events", offset_metadata="next=0")
    testing.produce(consumer, {"n": 1})
    testing.consume(consumer)
    assert read == ["next=0", "next=1"]
    assert testing.recorded(consumer).marks == [testing.Mark(1, sync=False, metadata="next=1")]


def test_seek_to_a_time_goes_to_the_first_fed_message_at_or_after_it() -> None:
    sought: list[int] = []
    when = datetime(2026, 3, 1, tzinfo=UTC)

    class Rewinding(Consumer):
        def consume(self) -> None:
            sought.append(self.seek(when))

    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("events", Rewinding)
    consumer = testing.consumer_for(app, "events")
    testing.produce(consumer, {"n": 0}, timestamp=datetime(2026, 2, 1, tzinfo=UTC))
    testing.produce(consumer, {"n": 1}, timestamp=datetime(2026, 3, 2, tzinfo=UTC))
    testing.consume(consumer)
    testing.produce(consumer, {"n": 2}, timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    testing.consume(consumer)
    assert sought == [1, 3], "the first at or after it, else the end"
    assert testing.recorded(consumer).seeks == [1, 3]
