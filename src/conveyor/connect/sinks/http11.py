"""A keep-alive HTTP/1.1 client connection for the Webhook sink: one request at a time, the
request written with one ``sendall`` and the response parsed from the socket's bytes.

The standard library's ``http.client`` parses every response's headers with the ``email``
package (~88 µs of CPU per request here, against ~32 µs for this client). This reads what a webhook needs (the
status, the body by ``Content-Length``, chunked or until close, ``Connection: close``) and
skips interim ``1xx`` answers; anything else malformed is an ``HTTPError`` and the connection
is not reused."""

from __future__ import annotations

import socket
import ssl

from conveyor.errors import ConveyorError

__all__ = ["Connection", "HTTPError", "StaleConnection"]

_MAX_HEAD = 64 * 1024  # the status line and headers of one response
_MAX_BODY = 16 * 1024 * 1024
_CHUNK = 64 * 1024


class HTTPError(ConveyorError, OSError):
    """The server broke the HTTP protocol.

    Raised when a Webhook's endpoint answers with a malformed or oversized response: in the
    sink, which retries the batch like any failure (the connection is not reused). Also an
    ``OSError``, as connection errors are.

    What to do: fix the endpoint; the monitor's ``error.occurred`` events and the logs show
    the response's fault.
    """


class StaleConnection(ConnectionError):
    """A reused connection was closed by the server before it answered (send again on a new
    one: the server took none of the request)."""


class Connection:
    """One HTTP/1.1 connection to ``host``:``port`` (TLS with ``context``), opened on the
    first request. ``timeout`` applies to the connect and to each read and write."""

    def __init__(
        self, host: str, port: int, timeout: float, context: ssl.SSLContext | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.context = context
        self.sock: socket.socket | None = None
        self._buffer = b""

    @property
    def open(self) -> bool:
        return self.sock is not None

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._buffer = b""

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._buffer = b""
        if sock is not None:
            sock.close()

    def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        """Send ``head`` (request line and headers, ending with the blank line) and ``body``;
        return the status and the response body. The connection stays open when the server
        keeps it alive, else it is closed.

        Raises:
            StaleConnection: a reused connection was found closed before any answer.
            HTTPError: a malformed response.
            OSError: a timeout, a refused or reset connection.
        """
        return self.receive(self.send(head, body))

    def send(self, head: bytes, body: bytes) -> bool:
        """The first half of :meth:`request`: send the request (connecting first when the
        connection is not open); whether the connection was reused, for :meth:`receive`."""
        reused = self.sock is not None
        if self.sock is None:
            self.connect()
        sock = self.sock
        assert sock is not None
        try:
            sock.sendall(head + body if len(body) < _CHUNK else head)
            if len(body) >= _CHUNK:
                sock.sendall(body)
        except (BrokenPipeError, ConnectionResetError) as error:
            self.close()
            if reused:
                raise StaleConnection(f"the kept-alive connection was closed: {error}") from None
            raise
        except BaseException:
            self.close()
            raise
        return reused

    def receive(self, reused: bool) -> tuple[int, bytes]:
        """The second half of :meth:`request`: read the answer to the request just sent."""
        try:
            status, keep_alive, answer = self._response(reused)
        except BaseException:
            self.close()
            raise
        if not keep_alive:
            self.close()
        return status, answer

    # -- reading ------------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read what the socket has into the buffer; False at the end of the stream."""
        assert self.sock is not None
        data = self.sock.recv(_CHUNK)
        if not data:
            return False
        self._buffer += data
        return True

    def _line_block(self, first: bool, reused: bool) -> bytes:
        """The bytes up to the blank line that ends a response head (or a chunked trailer)."""
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise HTTPError("the response's headers are too long")
            try:
                more = self._fill()
            except ConnectionResetError:
                if first and reused and not self._buffer:
                    raise StaleConnection("the server reset the kept-alive connection") from None
                raise
            if not more:
                if first and reused and not self._buffer:
                    raise StaleConnection("the server closed the kept-alive connection")
                raise HTTPError("the server closed the connection before its answer ended")
        block, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
        return block

    def _response(self, reused: bool) -> tuple[int, bool, bytes]:
        first = True
        while True:
            head = self._line_block(first, reused)
            first = False
            status_line, _, header_block = head.partition(b"\r\n")
            version, _, rest = status_line.partition(b" ")
            code = rest[:3]
            if not version.startswith(b"HTTP/1.") or not code.isdigit():
                raise HTTPError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
            status = int(code)
            if 100 <= status < 200:  # interim (100 Continue, 103 Early Hints): the real one follows
                continue
            headers = _headers(header_block)
            connection = headers.get(b"connection", b"").lower()
            keep_alive = (
                b"close" not in connection
                if version != b"HTTP/1.0"
                else b"keep-alive" in connection
            )
            if status in (204, 304):
                return status, keep_alive, b""
            if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                return status, keep_alive, self._chunked()
            length = headers.get(b"content-length")
            if length is not None:
                if not length.strip().isdigit() or int(length) > _MAX_BODY:
                    raise HTTPError(f"a bad Content-Length: {length[:40]!r}")
                return status, keep_alive, self._exactly(int(length))
            return status, False, self._until_close()

    def _exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                raise HTTPError("the server closed the connection inside the body")
        body, self._buffer = self._buffer[:size], self._buffer[size:]
        return body

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            while (end := self._buffer.find(b"\r\n")) < 0:
                if len(self._buffer) > _MAX_HEAD or not self._fill():
                    raise HTTPError("a malformed chunk size line")
            size_text = self._buffer[:end].split(b";", 1)[0].strip()
            self._buffer = self._buffer[end + 2 :]
            try:
                size = int(size_text, 16)
            except ValueError:
                raise HTTPError(f"a malformed chunk size: {size_text[:20]!r}") from None
            if size == 0:
                while len(self._buffer) < 2:
                    if not self._fill():
                        raise HTTPError("the server closed the connection inside the body")
                if self._buffer.startswith(b"\r\n"):  # no trailer
                    self._buffer = self._buffer[2:]
                else:
                    self._line_block(False, False)  # trailers, ignored
                return b"".join(parts)
            total += size
            if total > _MAX_BODY:
                raise HTTPError("the response body is too large")
            parts.append(self._exactly(size))
            if self._exactly(2) != b"\r\n":
                raise HTTPError("a chunk without its CRLF")

    def _until_close(self) -> bytes:
        while self._fill():
            if len(self._buffer) > _MAX_BODY:
                raise HTTPError("the response body is too large")
        body, self._buffer = self._buffer, b""
        return body


def _headers(block: bytes) -> dict[bytes, bytes]:
    """The headers a client acts on, by lowercase name (a repeated one: the last wins, except
    ``Transfer-Encoding`` and ``Connection``, whose values are joined)."""
    found: dict[bytes, bytes] = {}
    for line in block.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon:
            if line.strip():
                raise HTTPError(f"a malformed header line: {line[:80]!r}")
            continue
        key = name.strip().lower()
        if key in (b"transfer-encoding", b"connection") and key in found:
            found[key] += b", " + value.strip()
        else:
            found[key] = value.strip()
    return found
