"""``Webhook``: records POSTed as JSON over a pool of keep-alive HTTP/1.1 connections.

The connections are Conveyor's own minimal HTTP/1.1 client (``http11``): ~32 µs of CPU per
request where the standard library's ``http.client`` takes ~88 µs (its header parsing) and
httpx ~340 µs; at 2,400 records a second on 2 cores that was the difference between keeping
up and falling behind (see bench/connector_latency.py)."""

from __future__ import annotations

import select
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from conveyor.connect.sink import Reject, Result, Retry
from conveyor.connect.sinks.http11 import Connection, StaleConnection
from conveyor.connect.sinks.records import encoded_record, record_json
from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["Webhook"]

# Headers the client writes itself; a user's own would contradict them.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


def _origin(url: str) -> tuple[bool, str, int, str]:
    """``url`` as (https, host, port, request target); a malformed one is refused, named."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ConfigurationError(
            f"the webhook url is malformed: {url!r} ({error})", "url"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"the webhook url must be http(s)://host/...: {url!r}", "url")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    https = parts.scheme == "https"
    return https, parts.hostname, port or (443 if https else 80), target


def _request_head(url: str, headers: Mapping[str, str]) -> bytes:
    """The request line and headers of every POST to ``url``, up to the Content-Length value."""
    https, host, port, target = _origin(url)
    lines = [f"POST {target} HTTP/1.1"]
    default_port = 443 if https else 80
    authority = f"[{host}]" if ":" in host else host
    lines.append(f"Host: {authority}" + ("" if port == default_port else f":{port}"))
    for name, value in headers.items():
        text = f"{name}{value}"
        if any(c in text for c in "\r\n\0") or not name or ":" in name:
            raise ConfigurationError(f"a malformed webhook header: {name!r}", "headers")
        if name.lower() in _OWN_HEADERS:
            raise ConfigurationError(
                f"the webhook sets the {name} header itself; leave it out of headers", "headers"
            )
        lines.append(f"{name}: {value}")
    lines.append("Content-Length: ")
    try:
        return "\r\n".join(lines).encode("latin-1")
    except UnicodeEncodeError:
        raise ConfigurationError(
            "webhook headers must be Latin-1 text (encode others yourself)", "headers"
        ) from None


class _Pool:
    """Keep-alive connections to one origin: at most ``size``, each used by one thread at a
    time (a thread waits on a semaphore while all are busy)."""

    def __init__(self, url: str, size: int, timeout: float) -> None:
        https, self._host, self._port, _ = _origin(url)
        self._timeout = timeout
        self._context = ssl.create_default_context() if https else None
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def _connection(self) -> Connection:
        """An idle connection that is still open, else a new one (opened when used)."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return Connection(self._host, self._port, self._timeout, self._context)
            sock = connection.sock
            # Readable while idle means the server closed it (or broke the protocol).
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return connection
            connection.close()

    def post(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` after ``head`` (the request line and headers up to the
        Content-Length value); the status and the response body (raises ``OSError`` when no
        answer came)."""
        request_head = head + str(len(body)).encode("ascii") + b"\r\n\r\n"
        with self._slots:
            connection = self._connection()
            try:
                status, answer = connection.request(request_head, body)
            except StaleConnection:  # closed by the server meanwhile: nothing was taken
                connection = Connection(self._host, self._port, self._timeout, self._context)
                status, answer = connection.request(request_head, body)
            if connection.open:
                with self._lock:
                    self._idle.append(connection)
            return status, answer

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


class Webhook:
    """POSTs each record (or, with ``batch=True``, each batch as a JSON array) to ``url``.

    2xx: delivered. 4xx: rejected (to the dead letter queue, with the status and the start
    of the response). 5xx, timeouts and connection errors: retried after the route's back-off
    (with ``batch=False``, from the record that failed; those before it count as delivered).
    ``concurrency`` bounds the pool's keep-alive connections (lanes share them); ``timeout``
    is per connect and per read. ``encode(record) -> dict`` shapes the body (a record it
    cannot encode is rejected)."""

    def __init__(
        self,
        url: str,
        *,
        batch: bool = False,
        concurrency: int = 16,
        timeout: float = 5.0,
        headers: Mapping[str, str] | None = None,
        encode: Callable[[Message], Any] = record_json,
    ) -> None:
        _origin(url)  # refused now, when the app is built, not at the first record
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(
                f"concurrency must be 1 or more, not {concurrency!r}", "concurrency"
            )
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigurationError(f"timeout must be more than 0 s, not {timeout!r}", "timeout")
        self.url = url
        self.batch = batch
        self.concurrency = concurrency
        self.timeout = timeout
        self.headers = {"content-type": "application/json", **(headers or {})}
        self._head = _request_head(url, self.headers)  # bad headers refused when built
        self._encode = encode
        self._pool: _Pool | None = None

    def open(self) -> None:
        self._pool = _Pool(self.url, self.concurrency, self.timeout)

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        bodies: list[bytes | Reject] = []
        for record in records:
            try:
                bodies.append(encoded_record(record, self._encode))
            except Exception as error:
                bodies.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))
        if self.batch:
            good = [body for body in bodies if isinstance(body, bytes)]
            verdict = self._post(b"[" + b",".join(good) + b"]") if good else None
            return [body if isinstance(body, Reject) else verdict for body in bodies]
        results: list[Result] = []
        for body in bodies:
            result = body if isinstance(body, Reject) else self._post(body)
            results.append(result)
            if isinstance(result, Retry):
                results.extend(Retry("after an earlier record") for _ in bodies[len(results) :])
                break
        return results

    def _post(self, body: bytes) -> Result:
        pool = self._pool
        assert pool is not None, "the sink is not open"
        try:
            status, answer = pool.post(self._head, body)
        except OSError as error:  # HTTPError (a broken answer) too
            return Retry(f"{type(error).__name__}: {error}")
        if status < 300:
            return None
        reason = f"HTTP {status}: {answer[:200].decode('utf-8', 'replace')}"
        return Reject(reason) if 400 <= status < 500 else Retry(reason)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
