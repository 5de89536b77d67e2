"""send_offsets takes Conveyor's own types and commits one past each partition's highest."""

from __future__ import annotations

from conveyor.messages import Deserializers, Message, Messages
from conveyor.producer.transactions import _next_offsets
from unit.processing.fakes import FakeRaw


def test_a_batch_commits_past_its_last_message() -> None:
    batch = Messages([FakeRaw(4), FakeRaw(5)], Deserializers(), "orders", 0)
    assert _next_offsets(batch) == [("orders", 0, 6)]


def test_messages_commit_past_the_highest_per_partition() -> None:
    messages = [
        Message(FakeRaw(9, partition=1), Deserializers()),
        Message(FakeRaw(3, partition=0), Deserializers()),
        Message(FakeRaw(7, partition=1), Deserializers()),
    ]
    assert sorted(_next_offsets(messages)) == [("orders", 0, 4), ("orders", 1, 10)]


def test_triples_pass_through() -> None:
    assert _next_offsets([("a", 0, 12), ("a", 0, 10)]) == [("a", 0, 12)]


def test_an_empty_batch_commits_nothing() -> None:
    assert _next_offsets(Messages([], Deserializers(), "orders", 0)) == []
