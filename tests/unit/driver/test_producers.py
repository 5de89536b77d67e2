"""librdkafka's clients as Conveyor drives them: a closed client lets librdkafka's producer or
admin client go at once (threads, sockets); a hung call gives the client up; a burst of
timed-out deliveries is explained with one question to the cluster."""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException

from conveyor.driver import producers
from conveyor.driver.admin import AdminConnection
from conveyor.driver.producers import ProducerClient
from conveyor.errors import DeliveryError, KafkaError, TransactionError

if TYPE_CHECKING:
    from unit.conftest import YoungClock


def librdkafka_threads() -> set[str]:
    """This process's threads that librdkafka started (it names them ``rdk:...``), by id: a
    test checks the threads of its own client, whatever other tests' clients do meanwhile."""
    found = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile (ENOENT, ESRCH)
            if (task / "comm").read_text().startswith("rdk:"):
                found.add(task.name)
    return found


def ended(threads: set[str], timeout: float = 1.0) -> bool:
    """Whether ``threads`` are gone within ``timeout`` seconds. librdkafka's destroy joins its
    threads, but a joined thread still shows in ``/proc`` for a moment while the kernel ends
    it (about one close in fifteen here); a client left to the collector keeps them for good
    (the checks turn the collector off)."""
    deadline = time.monotonic() + timeout
    while librdkafka_threads() & threads:
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.001)
    return True


def alone(check: Callable[[], None]) -> None:
    """Run ``check`` (a function of this module) in a fresh interpreter, where the only
    librdkafka threads are its client's: in a pytest-xdist worker other tests' clients start
    and end threads meanwhile (a broker thread for a new connection), and a thread's id does
    not say whose it is."""
    tests = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run(
        [sys.executable, "-m", "unit.driver.test_producers", check.__name__],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-6000:]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_closing_destroys_librdkafka_now_not_at_a_full_collection() -> None:
    alone(closing_a_producer_destroys_librdkafka_now)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_closing_an_admin_connection_destroys_librdkafka_now() -> None:
    alone(closing_an_admin_connection_destroys_librdkafka_now)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_a_kept_transaction_error_does_not_keep_librdkafka_alive() -> None:
    alone(a_kept_transaction_error_lets_librdkafka_go)


def closing_a_producer_destroys_librdkafka_now() -> None:
    before = librdkafka_threads()
    gc.disable()  # what goes must go by itself: the collector's full collections are rare
    try:
        client = ProducerClient(
            {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "closing",
            on_error=lambda _error: None, on_fatal=lambda _error: None,
        )  # fmt: skip
        mine = librdkafka_threads() - before
        assert mine
        client.close(0.0)
        assert ended(mine)
        with pytest.raises(KafkaError, match="closed"):
            client.begin_transaction()
    finally:
        gc.enable()


def closing_an_admin_connection_destroys_librdkafka_now() -> None:
    before = librdkafka_threads()
    gc.disable()
    try:
        connection = AdminConnection({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
        mine = librdkafka_threads() - before
        assert mine
        connection.close()
        assert ended(mine)
        with pytest.raises(KafkaError, match="closed"):
            connection.metadata(None, 1.0)
    finally:
        gc.enable()


def a_kept_transaction_error_lets_librdkafka_go() -> None:
    """An error kept for a report or a retry holds its traceback, and the traceback the frames
    it went through: none of them may hold librdkafka's producer once its client closed."""
    before = librdkafka_threads()
    gc.disable()
    try:
        client = ProducerClient(
            {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "transactional.id": "kept"},
            "kept", on_error=lambda _error: None, on_fatal=lambda _error: None,
        )  # fmt: skip
        mine = librdkafka_threads() - before
        with pytest.raises(TransactionError) as raised:
            client.begin_transaction()  # before init_transactions: refused at once
        kept = raised.value
        client.close(0.0)
        assert mine
        assert ended(mine), "the kept error's traceback held the producer"
        assert kept.__traceback__ is not None
    finally:
        gc.enable()


class IdleProducer:
    """A stand-in for librdkafka's producer with nothing queued (what the poller asks)."""

    def __len__(self) -> int:
        return 0

    def poll(self, _timeout: float = 0.0) -> int:
        return 0


class HangingOffsets(IdleProducer):
    """librdkafka's producer when ``send_offsets_to_transaction`` never returns (its
    coordinator went away: confluentinc/librdkafka#5456)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.nudged = threading.Event()

    def send_offsets_to_transaction(self, *_args: Any) -> None:
        self.release.wait(30)

    def list_topics(self, *_args: Any, **_kwargs: Any) -> None:
        """A metadata request: what lets librdkafka's hung coordinator lookup go on (#5511)."""
        self.nudged.set()


def test_a_send_offsets_that_never_returns_gives_the_client_up_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producers, "_SEND_OFFSETS_GRACE", 0.2)
    monkeypatch.setattr(producers, "_UNSTICK_EVERY", 0.05)
    client = ProducerClient(
        {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "hanging",
        on_error=lambda _error: None, on_fatal=lambda _error: None,
    )  # fmt: skip
    real, hanging = client._kafka, HangingOffsets()
    client._kafka = hanging
    try:
        started = time.monotonic()
        with pytest.raises(TransactionError, match="did not return") as raised:
            client.send_offsets([("orders", 0, 5)], None, 0.1)
        assert time.monotonic() - started < 5
        assert raised.value.fatal
        assert client.fatal is raised.value  # rebuilt before reuse
        assert hanging.nudged.wait(5), "the abandoned producer is nudged until the call returns"
        hanging.release.set()
        nudgers = [t for t in threading.enumerate() if t.name == "conveyor-unstick"]
        for nudger in nudgers:
            nudger.join(5)
        assert not any(t.is_alive() for t in nudgers), "the nudging ends with the hung call"
    finally:
        hanging.release.set()
        client._kafka = real
        client.close(0.0)


class OffsetsWaitingForABrokerChange(IdleProducer):
    """librdkafka's producer when ``send_offsets_to_transaction`` looks up a coordinator whose
    broker stopped and came back: it goes on only when a broker's state changes, which a
    metadata request makes happen (confluentinc/librdkafka#5511)."""

    def __init__(self) -> None:
        self.nudged = threading.Event()

    def send_offsets_to_transaction(self, *_args: Any) -> None:
        self.nudged.wait(30)

    def list_topics(self, *_args: Any, **_kwargs: Any) -> None:
        self.nudged.set()


def test_a_send_offsets_waiting_for_a_returned_broker_is_nudged_on_and_the_client_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producers, "_UNSTICK_EVERY", 0.05)
    client = ProducerClient(
        {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "waiting",
        on_error=lambda _error: None, on_fatal=lambda _error: None,
    )  # fmt: skip
    real, waiting = client._kafka, OffsetsWaitingForABrokerChange()
    client._kafka = waiting
    try:
        started = time.monotonic()
        client.send_offsets([("orders", 0, 5)], None, 10.0)  # returns: nothing raised
        assert time.monotonic() - started < 5, "it went on after a nudge, not at its timeout"
        assert client.fatal is None, "the transaction goes on with the same client"
    finally:
        waiting.nudged.set()
        client._kafka = real
        client.close(0.0)


class CountedMetadata(IdleProducer):
    """librdkafka's producer as the timeout explanation sees it: a metadata answer per topic
    (``None`` for a cluster that does not answer), each request counted."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked.append(topic)
        answer = self.answers[topic]
        if answer is None:
            raise RuntimeError("no broker answered")
        error = None if answer == "exists" else answer
        return SimpleNamespace(topics={topic: SimpleNamespace(error=error)})


def test_a_burst_of_timeouts_is_explained_with_one_request_per_topic(
    monkeypatch: pytest.MonkeyPatch, young_clock: YoungClock
) -> None:
    young_clock.seen_by(producers)  # nothing was asked yet, even minutes after a boot
    client = ProducerClient(
        {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "explaining",
        on_error=lambda _error: None, on_fatal=lambda _error: None,
    )  # fmt: skip
    real = client._kafka
    client._kafka = cluster = CountedMetadata(
        {"gone": "UNKNOWN_TOPIC_OR_PART", "there": "exists", "unanswered": None, "other": None}
    )
    monkeypatch.setattr(producers, "_EXPLAINED_FOR", 3600.0)  # no answer ages meanwhile
    try:
        topics = ["gone"] * 5 + ["there"] * 3 + ["gone"]
        assert [client.topic_missing(topic) for topic in topics] == [
            topic == "gone" for topic in topics
        ]
        assert cluster.asked == ["gone", "there"]
        # A cluster that does not answer for one topic is not asked for the next either.
        for topic in ["unanswered"] * 3 + ["other"] * 3:
            assert not client.topic_missing(topic)
        assert cluster.asked == ["gone", "there", "unanswered"]
        monkeypatch.setattr(producers, "_EXPLAINED_FOR", 0.0)  # the answers have aged
        client.topic_missing("gone")
        assert cluster.asked == ["gone", "there", "unanswered", "gone"]
    finally:
        client._kafka = real
        client.close(0.0)


def test_a_message_librdkafka_refused_at_once_was_not_persisted() -> None:
    """produce() raising (a partition the topic does not have) means the message never
    entered librdkafka's queue: safe to send again."""
    client = ProducerClient(
        {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "refusing",
        on_error=lambda _error: None, on_fatal=lambda _error: None,
    )  # fmt: skip
    try:
        refusal = KafkaException(ConfluentError(ConfluentError._UNKNOWN_PARTITION))
        failure = client.refused(refusal, "orders")
        assert isinstance(failure, DeliveryError)
        assert (failure.name, failure.persistence) == ("_UNKNOWN_PARTITION", "not_persisted")
    finally:
        client.close(0.0)


if __name__ == "__main__":  # alone(): one check, in this fresh interpreter
    globals()[sys.argv[1]]()
