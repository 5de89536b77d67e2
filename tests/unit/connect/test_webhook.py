"""The Webhook sink's connection pool against a real local HTTP server (``Recorder``, on the
standard library's, so that each test controls keep-alive and timing): kept-alive connections the server closed
are replaced without a retry, timeouts and refused connections are retries, bad settings are
refused when the sink is built."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest

from conveyor.connect import Retry
from conveyor.connect.sinks import Webhook
from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers, Message
from unit.connect.http_recorder import Recorder
from unit.processing.fakes import FakeRaw


def records(*offsets: int) -> list[Message]:
    return [Message(FakeRaw(o, key=b"k", value=b'{"n": 1}'), Deserializers()) for o in offsets]


def test_the_request_carries_the_host_the_length_and_the_users_headers() -> None:
    seen: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_one() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b'"n":1}' not in data:
                data += conn.recv(4096)
            seen.append(data)
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    thread = threading.Thread(target=answer_one, daemon=True)
    thread.start()
    sink = Webhook(f"http://127.0.0.1:{port}/hook?x=1", headers={"Authorization": "Bearer t"})
    sink.open()
    assert sink.deliver(records(0)) == [None]
    sink.close()
    thread.join(5)
    listener.close()
    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /hook?x=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{port}".encode() in lines
    assert b"Authorization: Bearer t" in lines
    assert b"content-type: application/json" in lines
    assert f"Content-Length: {len(body)}".encode() in lines
    assert json.loads(body)["payload"] == {"n": 1}


def test_a_kept_alive_connection_is_reused(serve: Callable[..., Recorder]) -> None:
    server = serve()
    sink = Webhook(server.url)
    sink.open()
    for offset in range(5):
        assert sink.deliver(records(offset)) == [None]
    sink.close()
    assert (server.requests, server.connections) == (5, 1)


def test_a_connection_the_server_closed_while_idle_is_replaced_not_retried(
    serve: Callable[..., Recorder],
) -> None:
    server = serve(idle=0.1)
    sink = Webhook(server.url)
    sink.open()
    assert sink.deliver(records(0)) == [None]
    assert server.closed.acquire(timeout=10), "the server closes the idle connection"
    assert sink.deliver(records(1)) == [None], "delivered on a new connection, no Retry"
    sink.close()
    assert (server.requests, server.connections) == (2, 2)


def test_a_timeout_is_a_retry(serve: Callable[..., Recorder]) -> None:
    never = threading.Event()
    server = serve(hold=lambda _key, _offset: never)
    sink = Webhook(server.url, timeout=0.2)
    sink.open()
    try:
        [result] = sink.deliver(records(0))
    finally:
        never.set()
    assert isinstance(result, Retry)
    assert "timed out" in result.reason
    sink.close()


def test_a_refused_connection_is_a_retry_and_so_are_the_records_after_it() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = Webhook(f"http://127.0.0.1:{port}/hook")
    sink.open()
    first, second = sink.deliver(records(0, 1))
    assert isinstance(first, Retry)
    assert "ConnectionRefusedError" in first.reason
    assert isinstance(second, Retry)
    sink.close()


@pytest.mark.parametrize(
    ("arguments", "setting"),
    [
        ({"url": "ftp://example.com/hook"}, "url"),
        ({"url": "http:///hook"}, "url"),
        ({"url": "http://example.com:99999/hook"}, "url"),
        ({"url": f"http://{'a' * 64}.example.com/hook"}, "url"),
        ({"url": "http://example.com/hook", "concurrency": 0}, "concurrency"),
        ({"url": "http://example.com/hook", "timeout": 0}, "timeout"),
        ({"url": "http://example.com/hook", "headers": {"Content-Length": "9"}}, "headers"),
        ({"url": "http://example.com/hook", "headers": {"X-Id": "a\r\nX-Evil: 1"}}, "headers"),
        ({"url": "http://example.com/hook", "headers": {"X-Name": "caf\u00e9 \u2615"}}, "headers"),
    ],
)
def test_bad_settings_are_refused_when_the_sink_is_built(
    arguments: dict[str, Any], setting: str
) -> None:
    url = arguments.pop("url")
    with pytest.raises(ConfigurationError) as refused:
        Webhook(url, **arguments)
    assert refused.value.setting == setting


def test_a_connection_on_a_descriptor_above_1023_is_reused(
    serve: Callable[..., Recorder],
) -> None:
    # select() refuses descriptors above 1023 (FD_SETSIZE); a busy process has them.
    import os  # noqa: PLC0415
    import resource  # noqa: PLC0415

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1200:
        pytest.skip(f"this machine allows {hard} open files; the test needs 1,200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    held: list[int] = []
    server = serve()
    sink = Webhook(server.url)
    sink.use_route("orders", "key", True)
    sink.open()
    try:
        while not held or held[-1] <= 1030:  # the next sockets land above 1023
            held.append(os.open(os.devnull, os.O_RDONLY))
        assert sink.deliver(records(0)) == [None]
        assert sink.deliver(records(1)) == [None]
        keyed = [
            Message(FakeRaw(2 + n, key=key, value=b'{"n": 1}'), Deserializers())
            for n, key in enumerate((b"a", b"b"))
        ]
        assert sink.deliver(keyed) == [None, None]
        assert server.requests == 4
        assert server.connections == 2, "the idle connection was checked and reused"
    finally:
        sink.close()
        for descriptor in held:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
