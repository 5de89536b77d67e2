"""Who reads an RPC client's results, without a broker: the results topic is a fake the test
publishes replies to, the requests go to a recording stand-in for the producer.

A thread waiting in ``call()`` reads the results itself; threads calling meanwhile follow and
take over; a background reader serves ``call_async`` calls nobody waits for. Each test ends
on a positive marker (a reply received), never on a sleep."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conveyor.rpc import client as client_module
from conveyor.rpc.client import Client


class Reply:
    """Stands for one message of the results topic."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.raw_payload = json.dumps(body).encode()
        self._raw = None


class Results:
    """The results topic: ``poll`` waits (on a condition) for what the test publishes."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        self.waiting: list[Reply] = []
        self.changed = threading.Condition()
        self.readers: list[str] = []  # the thread of every poll that returned replies

    def publish(self, *bodies: dict[str, Any]) -> None:
        with self.changed:
            self.waiting.extend(Reply(body) for body in bodies)
            self.changed.notify_all()

    def poll(self, timeout: float, limit: int = 500) -> list[Reply]:
        with self.changed:
            self.changed.wait_for(lambda: bool(self.waiting), timeout)
            taken, self.waiting = self.waiting, []
        if taken:
            self.readers.append(threading.current_thread().name)
        return taken

    def close(self) -> None:
        return None


class Requests:
    """Stands for the producer: keeps each request, and says when one came."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.changed = threading.Condition()

    def produce_unhurried(self, message: dict[str, Any]) -> None:
        with self.changed:
            self.sent.append(json.loads(message["payload"]))
            self.changed.notify_all()

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.sent) >= count, 10), self.sent
            return list(self.sent)

    def close(self) -> None:
        return None


def ok(request: dict[str, Any]) -> dict[str, Any]:
    return {"id": request["id"], "ok": request["args"][0]}


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setattr(client_module, "Iterator", Results)
    monkeypatch.setattr(client_module, "_partitions", lambda _kafka, _topic: [0])
    monkeypatch.setattr(client_module, "Producer", lambda _kafka: Requests())
    made = Client({"bootstrap.servers": "127.0.0.1:1"}, commands_topic="c", results_topic="r")
    yield made
    made.close()


def results(client: Client) -> Results:
    return client._results  # type: ignore[return-value]


def requests(client: Client) -> Requests:
    return client._producer  # type: ignore[return-value]


def test_a_caller_reads_its_own_reply(client: Client) -> None:
    answered = concurrent.futures.ThreadPoolExecutor(1).submit(client.call, "echo", 1, timeout=10)
    [request] = requests(client).wait_for(1)
    results(client).publish(ok(request))
    assert answered.result(10) == 1
    assert results(client).readers[0].startswith("ThreadPoolExecutor"), results(client).readers


def test_a_follower_gets_its_reply_from_the_reader_and_a_call_async_is_not_forgotten(
    client: Client,
) -> None:
    """The reader's and its follower's replies come in one read, so the follower finds its
    call ended and never reads; a call_async sent meanwhile must then be read by the
    background reader (nobody left in call() reads for it)."""
    pool = concurrent.futures.ThreadPoolExecutor(2)
    leader = pool.submit(client.call, "echo", "leader", timeout=10)
    requests(client).wait_for(1)
    deadline = time.monotonic() + 10
    while not client._reading and time.monotonic() < deadline:  # the leader is reading
        time.sleep(0.001)
    follower = pool.submit(client.call, "echo", "follower", timeout=10)
    requests(client).wait_for(2)
    while client._followers < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert client._followers == 1
    unattended = client.call_async("echo", "async", timeout=10)
    sent = requests(client).wait_for(3)
    results(client).publish(ok(sent[0]), ok(sent[1]))
    assert (leader.result(10), follower.result(10)) == ("leader", "follower")
    results(client).publish(ok(sent[2]))
    assert unattended.result(10) == "async"
    assert results(client).readers[-1] == "conveyor-rpc-results"


def test_a_cancelled_future_does_not_stop_the_reading(client: Client) -> None:
    cancelled = client.call_async("echo", "x", timeout=10)
    assert cancelled.cancel()
    kept = client.call_async("echo", "y", timeout=10)
    sent = requests(client).wait_for(2)
    results(client).publish(ok(sent[0]), ok(sent[1]))
    assert kept.result(10) == "y"
    assert client.pending() == 0
