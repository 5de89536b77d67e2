"""The Webhook sink POSTing the keys of one batch side by side (a route with ordering "key"
or "none"), against a real local HTTP server that logs what arrives and can hold answers: the
keys' requests overlap, one key's never do, a failure stops its key only, the answer keeps the
serial form (a Retry from the first record not delivered on), and ordering "partition" stays
one request after another."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from conveyor.connect import Reject, Retry
from conveyor.connect.sinks import Webhook
from conveyor.connect.sinks.http11 import Connection
from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers, Message
from unit.connect.http_recorder import Recorder
from unit.processing.fakes import FakeRaw


def batch(*keys: str) -> list[Message]:
    """One record per key given, offsets 0, 1, 2 ... in that order."""
    return [
        Message(FakeRaw(offset, key=key.encode(), value=b'{"n": 1}'), Deserializers())
        for offset, key in enumerate(keys)
    ]


def webhook(
    server: Recorder | str, ordering: str | None = "key", dead_letters: bool = True, **options: Any
) -> Webhook:
    sink = Webhook(server if isinstance(server, str) else server.url, **options)
    if ordering is not None:
        sink.use_route("orders", ordering, dead_letters)
    sink.open()
    return sink


def free_slots(sink: Webhook) -> int:
    """The pool's connections not in use (every request hands its slot back)."""
    return sink._pool._slots._value  # type: ignore[union-attr]


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
    # (the server's threads may log b's arrival before a's: both were on the wire)
    log = server.log
    assert log.index(("in", "b", 1)) < log.index(("out", "a", 0)), "b was sent while a was held"


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


def test_a_request_that_times_out_stops_its_key_only_and_hands_its_connection_back(
    serve: Callable[..., Recorder],
) -> None:
    answer_b = threading.Event()
    server = serve(hold=lambda key, _o: answer_b if key == "b" else None)
    sink = webhook(server, timeout=0.3, concurrency=2)
    records = batch("a", "b", "a", "b")
    try:
        results = sink.deliver(records)
        assert free_slots(sink) == 2
    finally:
        answer_b.set()
    assert results[0] is None
    assert isinstance(results[1], Retry)
    assert "timed out" in results[1].reason
    assert all(isinstance(result, Retry) for result in results[2:]), results
    assert ("a", 2) in server.arrived(), "a went on while b waited"
    assert ("b", 3) not in server.arrived()
    sent = len(server.arrived())
    assert sink.deliver(records[1:]) == [None] * 3
    sink.close()
    assert server.arrived()[sent:] == [("b", 1), ("b", 3)], "a's record was not POSTed twice"


def test_an_endpoint_that_cannot_be_reached_costs_one_connect_not_one_per_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    attempts: list[int] = []
    connect = Connection.connect

    def counted(connection: Connection) -> None:
        attempts.append(1)
        connect(connection)

    monkeypatch.setattr(Connection, "connect", counted)
    sink = webhook(f"http://127.0.0.1:{port}/hook")
    results = sink.deliver(batch(*"abcdefgh"))
    assert len(attempts) == 1
    assert all(isinstance(result, Retry) for result in results)
    assert isinstance(results[0], Retry)
    assert "ConnectionRefusedError" in results[0].reason
    assert free_slots(sink) == sink.concurrency
    sink.close()


def test_an_unexpected_error_hands_the_connection_back(
    serve: Callable[..., Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve()
    sink = webhook(server, concurrency=2)
    send = Connection.send
    failures = [RuntimeError("a bug")]

    def failing(connection: Connection, head: bytes, body: bytes) -> bool:
        if failures:
            raise failures.pop()
        return send(connection, head, body)

    monkeypatch.setattr(Connection, "send", failing)
    with pytest.raises(RuntimeError):
        sink.deliver(batch("a", "b"))
    assert free_slots(sink) == 2
    assert sink.deliver(batch("a", "b")) == [None, None]
    sink.close()


def test_a_kept_alive_connection_closed_before_its_answer_is_sent_again(
    serve: Callable[..., Recorder],
) -> None:
    # The server reads each connection's second request and closes it without an answer
    # (the race a keep-alive timeout makes): the request goes again on a new connection, and
    # its key's next record waits for that answer. Answers come after 20 ms, so that a key's
    # next record sent too soon would arrive while its resent one is still unanswered.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    lock = threading.Lock()
    answered: list[tuple[str, int]] = []
    unanswered: dict[str, int] = {}
    overlaps = [0]
    dropped = [0]

    def serve_connection(conn: socket.socket) -> None:
        served = 0
        with conn:
            buffer = b""
            while True:
                while b"}}" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                request, _, buffer = buffer.partition(b"}}")
                record = json.loads(request.partition(b"\r\n\r\n")[2] + b"}}")
                key = record["key"]
                served += 1
                if served == 2:
                    with lock:
                        dropped[0] += 1
                    return  # closed without an answer
                with lock:
                    overlaps[0] += unanswered.get(key, 0)
                    unanswered[key] = unanswered.get(key, 0) + 1
                time.sleep(0.02)
                with lock:
                    unanswered[key] -= 1
                    answered.append((key, record["offset"]))
                conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_connection, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sink = webhook(f"http://127.0.0.1:{port}/hook", concurrency=4)  # slots to spare
    try:
        assert sink.deliver(batch("a", "b")) == [None, None]
        assert sink.deliver(batch("a", "b", "a", "b", "a", "b")) == [None] * 6, "no Retry"
        assert free_slots(sink) == 4
    finally:
        sink.close()
        listener.close()
    assert dropped[0] >= 2, "the kept-alive connections were closed before their answers"
    assert overlaps[0] == 0, "a key's next record went before its resent one was answered"
    for key in "ab":
        offsets = [offset for k, offset in answered if k == key]
        assert offsets == sorted(offsets)
    assert len(answered) == 8


def test_without_a_dead_letter_queue_a_4xx_stops_its_key(serve: Callable[..., Recorder]) -> None:
    server = serve(status=lambda key, offset: 400 if (key, offset) == ("a", 0) else 204)
    sink = webhook(server, dead_letters=False)
    records = batch("a", "b", "a")
    results = sink.deliver(records)
    assert isinstance(results[0], Reject), "the route retries it (no DLQ)"
    assert all(isinstance(result, Retry) for result in results[1:])
    assert ("a", 2) not in server.arrived(), "a's next must wait for the 4xx one"
    assert ("b", 1) in server.arrived()
    sent = len(server.arrived())
    sink.deliver(records)  # the route's retry: b's record answered from memory
    sink.close()
    assert [key for key, _o in server.arrived()[sent:]] == ["a"]


def test_a_4xx_beyond_a_failure_is_rejected_again_not_taken_as_delivered(
    serve: Callable[..., Recorder],
) -> None:
    failing = {("a", 0)}
    server = serve(
        status=lambda key, offset: 503 if (key, offset) in failing else 422 if key == "b" else 204
    )
    sink = webhook(server)
    records = batch("a", "b")
    assert all(isinstance(result, Retry) for result in sink.deliver(records))
    failing.clear()
    results = sink.deliver(records)
    sink.close()
    assert results[0] is None
    assert isinstance(results[1], Reject)
    assert "HTTP 422" in results[1].reason
    assert server.arrived().count(("b", 1)) == 1, "answered from memory"


def test_ordering_none_posts_keyless_records_side_by_side(serve: Callable[..., Recorder]) -> None:
    server = serve()
    sink = webhook(server, ordering="none")
    records = [Message(FakeRaw(offset, value=b'{"n": 1}'), Deserializers()) for offset in range(4)]
    assert sink.deliver(records) == [None] * 4
    sink.close()
    assert server.connections == 4, "the four went out together"


def test_records_without_a_key_are_one_queue_beside_the_keyed_ones(
    serve: Callable[..., Recorder],
) -> None:
    server = serve()
    sink = webhook(server)
    records = [
        Message(FakeRaw(offset, key=key, value=b'{"n": 1}'), Deserializers())
        for offset, key in enumerate([None, b"a", None, b"a", None])
    ]
    assert sink.deliver(records) == [None] * 5
    sink.close()
    assert server.overlaps_per_key == 0
    arrived = server.arrived()
    keyless = [offset for key, offset in arrived if key is None]
    assert keyless == [0, 2, 4]
    assert server.connections == 2


def test_lanes_sharing_a_small_pool_all_deliver(serve: Callable[..., Recorder]) -> None:
    server = serve()
    sink = webhook(server, concurrency=2)
    outcomes: list[list[Any]] = []

    def lane(name: str) -> None:
        for _ in range(20):
            outcomes.append(sink.deliver(batch(f"{name}1", f"{name}2", f"{name}3")))

    lanes = [threading.Thread(target=lane, args=(name,)) for name in "xyz"]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join(60)
    assert not any(thread.is_alive() for thread in lanes), "a lane is stuck waiting for a slot"
    sink.close()
    assert outcomes == [[None, None, None]] * 60
    assert server.most_in_flight <= 2


def test_one_webhook_serves_one_route() -> None:
    sink = Webhook("http://127.0.0.1:9/hook")
    sink.use_route("orders", "key", True)
    sink.use_route("orders", "key", True)  # the same route declared again is fine
    with pytest.raises(ConfigurationError) as refused:
        sink.use_route("payments", "key", True)
    assert refused.value.setting == "sink"
