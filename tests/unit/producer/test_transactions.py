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
    """A librdkafka producer whose commits and aborts fail ``failures`` times (a retriable
    ``error``, ``_TIMED_OUT`` by default) before they end; marked fatal when given up."""

    def __init__(self, failures: int, error: str = "_TIMED_OUT") -> None:
        self.failures = failures
        self.error = error
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
        if self.failures:
            self.failures -= 1
            raise TransactionError(f"failed: {self.error}", name=self.error, retriable=True)


def _transactions(client: TimingOutClient, reported: list[str]) -> Transactions:
    return Transactions(True, lambda: client, Monitor(), "p", lambda kind, _: reported.append(kind))


def test_a_commit_that_times_out_is_called_again_until_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never given up (it might still commit while its batch is retried), never aborted (an
    abort would be refused while the commit goes on in the background)."""
    monkeypatch.setattr(transactions_module, "_ABORT_RESUMING", 0.0)  # bounds aborts only
    client, reported = TimingOutClient(failures=4), []
    with _transactions(client, reported).transaction():
        pass
    assert client.calls == ["init", "begin", *["commit"] * 5]
    assert reported == ["transaction.commit.timeout"] * 4
    assert client.fatal is None


def test_an_abort_that_times_out_is_called_again_until_it_ends() -> None:
    client, reported = TimingOutClient(failures=3), []
    with pytest.raises(RuntimeError, match="boom"), _transactions(client, reported).transaction():
        raise RuntimeError("boom")
    assert client.calls == ["init", "begin", *["abort"] * 4]
    assert reported == ["transaction.abort.timeout"] * 3


def test_an_abort_still_timing_out_gives_the_client_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rebuilt by its producer, the client's successor fences the transaction."""
    monkeypatch.setattr(transactions_module, "_ABORT_RESUMING", 0.0)
    client, reported = TimingOutClient(failures=5), []
    with pytest.raises(RuntimeError, match="boom"), _transactions(client, reported).transaction():
        raise RuntimeError("boom")
    assert client.calls == ["init", "begin", "abort"]
    assert client.fatal is not None
    assert reported == ["transaction.abort.error"]


def test_only_a_timeout_is_resumed() -> None:
    """Other retriable errors come back at once (an API call in conflict, no producer id):
    made again in a loop they would spin; they fail the transaction as before."""
    client, reported = TimingOutClient(failures=1, error="_CONFLICT"), []
    with (
        pytest.raises(TransactionError, match="_CONFLICT"),
        _transactions(client, reported).transaction(),
    ):
        pass
    assert client.calls == ["init", "begin", "commit", "abort"]
    assert reported == []
