"""The Webhook sink POSTing the keys of one batch side by side (a route with ordering "key"
or "none"), against a real local HTTP server that logs what arrives and can hold answers: the
keys' requests overlap, one key's never do, a failure stops its key only, the answer keeps the
serial form (a Retry from the first record not delivered on), and ordering "partition" stays
one request after another."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conveyor.connect import Reject, Retry
from conveyor.connect.sinks import Webhook
from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers, Message
from unit.processing.fakes import FakeRaw


def batch(*keys: str) -> list[Message]:
    """One record per key given, offsets 0, 1, 2 ... in that order."""
    return [
        Message(FakeRaw(offset, key=key.encode(), value=b'{"n": 1}'), Deserializers())
        for offset, key in enumerate(keys)
    ]


class Recorder(ThreadingHTTPServer):
    """Logs each request's (key, offset) as it arrives and as it is answered; ``status``
    chooses each answer's status, ``hold`` may keep an answer back until an event is set."""

    daemon_threads = True

    def __init__(
        self,
        status: Callable[[str, int], int] = lambda _key, _offset: 204,
        hold: Callable[[str, int], threading.Event | None] = lambda _key, _offset: None,
        idle: float = 30.0,
    ) -> None:
        self.log: list[tuple[str, str, int]] = []  # ("in" | "out", key, offset)
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.most_in_flight = 0
        self.overlaps_per_key = 0
        self.connections = 0
        self.closed = threading.Semaphore(0)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.connections += 1

            def finish(self) -> None:
                super().finish()
                server.closed.release()

            def do_POST(self) -> None:
                record = json.loads(self.rfile.read(int(self.headers["content-length"])))
                key, offset = record["key"], record["offset"]
                with server.lock:
                    server.log.append(("in", key, offset))
                    server.overlaps_per_key += server.in_flight.get(key, 0)
                    server.in_flight[key] = server.in_flight.get(key, 0) + 1
                    server.most_in_flight = max(
                        server.most_in_flight, sum(server.in_flight.values())
                    )
                held = hold(key, offset)
                if held is not None:
                    held.wait(10)
                code = status(key, offset)
                with server.lock:
                    server.in_flight[key] -= 1
                    server.log.append(("out", key, offset))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def arrived(self) -> list[tuple[str, int]]:
        return [(key, offset) for kind, key, offset in self.log if kind == "in"]


@pytest.fixture
def serve() -> Iterator[Callable[..., Recorder]]:
    made: list[Recorder] = []

    def start(**options: Any) -> Recorder:
        server = Recorder(**options)
        made.append(server)
        return server

    yield start
    for server in made:
        server.shutdown()
        server.server_close()


def webhook(server: Recorder, ordering: str | None = "key", **options: Any) -> Webhook:
    sink = Webhook(server.url, **options)
    if ordering is not None:
        sink.use_ordering(ordering)
    sink.open()
    return sink


def test_the_keys_of_a_batch_are_posted_side_by_side(serve: Callable[..., Recorder]) -> None:
    # a's answer is held until b's request has arrived: only requests in flight together
    # let both through (one after another, a's would wait out the hold and b come after it).
    b_arrived = threading.Event()

    def hold(key: str, _offset: int) -> threading.Event | None:
        if key == "b":
            b_arrived.set()
            return None
        return b_arrived

    server = serve(hold=hold)
    sink = webhook(server)
    try:
        assert sink.deliver(batch("a", "b")) == [None, None]
    finally:
        b_arrived.set()
        sink.close()
    assert server.log[:2] == [("in", "a", 0), ("in", "b", 1)], "b was sent while a was held"
    assert server.most_in_flight == 2


@pytest.mark.parametrize("ordering", ["partition", None])
def test_ordering_partition_or_no_route_posts_one_after_another(
    serve: Callable[..., Recorder], ordering: str | None
) -> None:
    server = serve()
    sink = webhook(server, ordering=ordering)
    assert sink.deliver(batch("a", "b", "a", "c", "b")) == [None] * 5
    sink.close()
    assert server.most_in_flight == 1
    assert server.arrived() == [("a", 0), ("b", 1), ("a", 2), ("c", 3), ("b", 4)]


def test_one_keys_records_go_in_order_and_never_overlap(serve: Callable[..., Recorder]) -> None:
    server = serve()
    sink = webhook(server)
    keys = [key for _ in range(10) for key in "abcd"]
    assert sink.deliver(batch(*keys)) == [None] * len(keys)
    sink.close()
    arrived = server.arrived()
    assert sorted(arrived) == sorted((key, offset) for offset, key in enumerate(keys))
    for key in "abcd":
        offsets = [offset for k, offset in arrived if k == key]
        assert offsets == sorted(offsets), f"key {key} out of order"
    assert server.overlaps_per_key == 0, "a key had two requests in flight"
    assert server.connections == 4, "the four keys' first records went out together"


def test_a_failure_stops_its_key_and_the_answer_keeps_the_serial_form(
    serve: Callable[..., Recorder],
) -> None:
    failing = {("a", 2)}
    server = serve(status=lambda key, offset: 503 if (key, offset) in failing else 204)
    sink = webhook(server)
    records = batch("a", "b", "a", "b", "a", "b")
    results = sink.deliver(records)
    assert results[:2] == [None, None]
    assert all(isinstance(result, Retry) for result in results[2:]), results
    assert isinstance(results[2], Retry)
    assert "HTTP 503" in results[2].reason
    arrived = server.arrived()
    assert ("a", 4) not in arrived, "a's record after its failure was sent"
    assert {("b", 3), ("b", 5)} <= set(arrived), "b went on meanwhile"
    # The route delivers again from the record that failed: b's two are not POSTed twice.
    failing.clear()
    assert sink.deliver(records[2:]) == [None] * 4
    sink.close()
    again = server.arrived()[len(arrived) :]
    assert again == [("a", 2), ("a", 4)]


def test_a_rejected_record_does_not_stop_its_key(serve: Callable[..., Recorder]) -> None:
    server = serve(status=lambda key, offset: 400 if (key, offset) == ("a", 0) else 204)
    sink = webhook(server)
    results = sink.deliver(batch("a", "b", "a"))
    sink.close()
    assert isinstance(results[0], Reject)
    assert "HTTP 400" in results[0].reason
    assert results[1:] == [None, None]


def test_the_pool_bounds_the_requests_in_flight(serve: Callable[..., Recorder]) -> None:
    release = threading.Event()
    timer = threading.Timer(0.3, release.set)  # every answer waits until then
    server = serve(hold=lambda _k, _o: release)
    sink = webhook(server, concurrency=2)
    timer.start()
    try:
        assert sink.deliver(batch("a", "b", "c", "d")) == [None] * 4
    finally:
        release.set()
        sink.close()
    assert server.most_in_flight == 2


def test_connections_the_server_closed_while_idle_are_replaced_not_retried(
    serve: Callable[..., Recorder],
) -> None:
    server = serve(idle=0.1)
    sink = webhook(server)
    assert sink.deliver(batch("a", "b", "c")) == [None] * 3
    for _ in range(server.connections):
        assert server.closed.acquire(timeout=10), "the server closes the idle connections"
    assert sink.deliver(batch("a", "b", "c")) == [None] * 3, "sent again on new connections"
    sink.close()
    assert len(server.arrived()) == 6


def test_a_timeout_retries_what_was_in_flight_and_what_came_after(
    serve: Callable[..., Recorder],
) -> None:
    never = threading.Event()
    server = serve(hold=lambda key, _o: never if key == "b" else None)
    sink = webhook(server, timeout=0.3)
    try:
        results = sink.deliver(batch("a", "b", "a", "b"))
    finally:
        never.set()
        sink.close()
    assert results[0] is None
    assert all(isinstance(result, Retry) for result in results[1:]), results
    assert isinstance(results[1], Retry)
    assert "timed out" in results[1].reason


def test_one_webhook_serves_one_ordering() -> None:
    sink = Webhook("http://127.0.0.1:9/hook")
    sink.use_ordering("key")
    sink.use_ordering("key")  # the same route shape twice is fine
    with pytest.raises(ConfigurationError) as refused:
        sink.use_ordering("partition")
    assert refused.value.setting == "ordering"
