"""The Webhook's HTTP/1.1 client against a socket server that answers with canned bytes: bodies
by Content-Length, chunked (with extensions and trailers) and until close; interim 1xx
answers skipped; keep-alive kept or dropped as the server says; a kept-alive connection the
server closed is reported stale (nothing was taken); malformed answers are errors and the
connection is not reused."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from conveyor.connect.sinks.http11 import Connection, HTTPError, StaleConnection

HEAD = b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n"


class Canned:
    """Accepts connections one after another; on each, answers every request (read up to its
    2-byte body) with the next of ``answers``; a ``None`` closes the connection (right after
    the answer before it)."""

    def __init__(self, answers: list[bytes | tuple[bytes, ...] | None]) -> None:
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                while self.answers:
                    data = b""
                    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 2:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    if not data:
                        break
                    self.requests.append(data)
                    answer = self.answers.pop(0)
                    if answer is None:
                        break
                    for piece in answer if isinstance(answer, tuple) else (answer,):
                        conn.sendall(piece)  # pieces: each in a segment of its own
                        threading.Event().wait(0.02)
                    if self.answers and self.answers[0] is None:  # close after this answer
                        self.answers.pop(0)
                        break

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def canned() -> Iterator[list[Canned]]:
    made: list[Canned] = []
    yield made
    for server in made:
        server.close()


def serve(made: list[Canned], *answers: bytes | tuple[bytes, ...] | None) -> Connection:
    server = Canned(list(answers))
    made.append(server)
    return Connection("127.0.0.1", server.port, timeout=5)


def test_bodies_by_length_chunked_and_empty_on_one_kept_alive_connection(
    canned: list[Canned],
) -> None:
    connection = serve(
        canned,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n", b"\r\n"),
        (b"HTTP/1.1 200 OK\r\nContent-", b"Length: 4\r\n\r\nab", b"cd"),
    )
    assert connection.request(HEAD, b"{}") == (200, b"hello")
    assert connection.request(HEAD, b"{}") == (201, b"abcde")
    assert connection.request(HEAD, b"{}") == (204, b"")
    assert connection.request(HEAD, b"{}") == (202, b"")
    assert connection.request(HEAD, b"{}") == (200, b"ok"), "the last CRLF came later"
    assert connection.request(HEAD, b"{}") == (200, b"abcd"), "an answer in pieces"
    assert connection.open
    assert canned[0].connections == 1
    assert canned[0].requests[0] == HEAD + b"{}"
    connection.close()


def test_interim_answers_are_skipped(canned: list[Canned]) -> None:
    connection = serve(
        canned,
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    )
    assert connection.request(HEAD, b"{}") == (200, b"ok")
    connection.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n\r\nok",  # no length: the body ends when the server closes
    ],
)
def test_a_connection_the_server_will_close_is_not_kept(
    canned: list[Canned], answer: bytes
) -> None:
    connection = serve(canned, answer, None)
    status, body = connection.request(HEAD, b"{}")
    assert (status, body) == (200, b"ok")
    assert not connection.open


def test_a_kept_alive_connection_closed_by_the_server_is_stale(canned: list[Canned]) -> None:
    connection = serve(canned, b"HTTP/1.1 204 No Content\r\n\r\n", None)
    assert connection.request(HEAD, b"{}") == (204, b"")
    with pytest.raises(StaleConnection):
        connection.request(HEAD, b"{}")
    assert not connection.open


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"SMTP ready\r\n\r\n", "status line"),
        (b"HTTP/1.1 2xx OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "CRLF"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "inside the body"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "before its answer ended"),
    ],
)
def test_a_malformed_answer_is_an_error_and_the_connection_is_dropped(
    canned: list[Canned], answer: bytes, message: str
) -> None:
    connection = serve(canned, answer, None)
    with pytest.raises(HTTPError, match=message):
        connection.request(HEAD, b"{}")
    assert not connection.open


def test_a_large_body_is_sent_whole(canned: list[Canned]) -> None:
    big = b"x" * 200_000
    head = b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n"
    received = bytearray()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve_one() -> None:
        conn, _ = listener.accept()
        with conn:
            while len(received) < len(head) + len(big):
                received.extend(conn.recv(65536))
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    connection = Connection("127.0.0.1", listener.getsockname()[1], timeout=5)
    assert connection.request(head, big) == (204, b"")
    thread.join(5)
    listener.close()
    connection.close()
    assert bytes(received) == head + big
