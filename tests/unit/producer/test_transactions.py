"""send_offsets takes Conveyor's own types and commits one past each partition's highest; a
commit or abort that times out is called again (librdkafka resumes it), within a bound."""

from __future__ import annotations

import pytest

from conveyor.errors import KafkaError, TransactionError
from conveyor.instrumentation.monitor import Monitor
from conveyor.messages import Deserializers, Message, Messages
from conveyor.producer import transactions as transactions_module
from conveyor.producer.transactions import Transactions, _next_offsets
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


class TimingOutClient:
    """A librdkafka producer whose commits and aborts time out (retriable) ``timeouts`` times
    before they end; marked fatal when given up."""

    def __init__(self, timeouts: int) -> None:
        self.timeouts = timeouts
        self.calls: list[str] = []
        self.fatal: KafkaError | None = None

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")

    def mark_fatal(self, failure: KafkaError) -> None:
        self.fatal = failure

    def _call(self, verb: str) -> None:
        self.calls.append(verb)
        if self.timeouts:
            self.timeouts -= 1
            raise TransactionError("timed out", name="_TIMED_OUT", retriable=True)


def _transactions(client: TimingOutClient, reported: list[str]) -> Transactions:
    return Transactions(True, lambda: client, Monitor(), "p", lambda kind, _: reported.append(kind))


def test_a_commit_that_times_out_is_called_again_until_it_ends() -> None:
    client, reported = TimingOutClient(timeouts=2), []
    with _transactions(client, reported).transaction():
        pass
    assert client.calls == ["init", "begin", "commit", "commit", "commit"]
    assert reported == ["transaction.commit.timeout"] * 2
    assert client.fatal is None


def test_a_commit_still_timing_out_gives_the_client_up_instead_of_aborting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An abort would be refused (_CONFLICT: the commit goes on in the background); the client
    marked fatal is rebuilt by its producer, and its successor fences the transaction."""
    monkeypatch.setattr(transactions_module, "_RESUMING", 0.0)
    client, reported = TimingOutClient(timeouts=5), []
    with (
        pytest.raises(TransactionError, match="timed out"),
        _transactions(client, reported).transaction(),
    ):
        pass
    assert client.calls == ["init", "begin", "commit"]
    assert client.fatal is not None


def test_an_abort_that_times_out_is_called_again_until_it_ends() -> None:
    client, reported = TimingOutClient(timeouts=3), []
    with pytest.raises(RuntimeError, match="boom"), _transactions(client, reported).transaction():
        raise RuntimeError("boom")
    assert client.calls == ["init", "begin", "abort", "abort", "abort", "abort"]
    assert reported == ["transaction.abort.timeout"] * 3
