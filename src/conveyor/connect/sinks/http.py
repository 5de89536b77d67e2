"""``Webhook``: records POSTed as JSON over a pool of keep-alive HTTP/1.1 connections.

The pool is the standard library's ``http.client``: at 2,400 requests a second on 2 cores,
httpx spent 344 µs of CPU per request under the GIL against 120 µs here, and could not keep
up with a record per request (see bench/connector_latency.py)."""

from __future__ import annotations

import http.client
import json
import select
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from conveyor.connect.sink import Reject, Result, Retry
from conveyor.connect.sinks.records import record_json
from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["Webhook"]

# A reused connection the server closed meanwhile fails with one of these before any byte of
# the request was taken: sent again once on a fresh connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def _origin(url: str) -> tuple[bool, str, int | None, str]:
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
    return parts.scheme == "https", parts.hostname, port, target


class _Pool:
    """Keep-alive connections to one origin: at most ``size``, each used by one thread at a
    time (a thread waits on a semaphore while all are busy)."""

    def __init__(self, url: str, size: int, timeout: float) -> None:
        self._https, self._host, self._port, self.target = _origin(url)
        self._timeout = timeout
        self._context = ssl.create_default_context() if self._https else None
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection that is still open (and True), else a new one (and False)."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                break
            sock = connection.sock
            # Readable while idle means the server closed it (or broke the protocol).
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return connection, True
            connection.close()
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=self._context
            ), False
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout), False

    def post(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        """POST ``body``; the status and the response body (raises ``OSError`` or
        ``http.client.HTTPException`` when no answer came)."""
        with self._slots:
            connection, reused = self._connection()
            try:
                try:
                    return self._exchange(connection, body, headers)
                except _STALE:
                    if not reused:
                        raise
                    connection.close()
                    connection, _ = self._connection()
                    return self._exchange(connection, body, headers)
            except BaseException:
                connection.close()
                raise

    def _exchange(
        self, connection: http.client.HTTPConnection, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, bytes]:
        connection.request("POST", self.target, body, dict(headers))
        response = connection.getresponse()
        data = response.read()
        if response.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.append(connection)
        return response.status, data

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
        self._encode = encode
        self._pool: _Pool | None = None

    def open(self) -> None:
        self._pool = _Pool(self.url, self.concurrency, self.timeout)

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        bodies: list[bytes | Reject] = []
        for record in records:
            try:
                bodies.append(json.dumps(self._encode(record)).encode("utf-8"))
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
            status, answer = pool.post(body, self.headers)
        except (OSError, http.client.HTTPException) as error:
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
