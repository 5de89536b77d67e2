"""The Webhook's pool of keep-alive HTTP/1.1 connections to one origin: a slot per request in
flight (lanes share them), idle connections checked before they are reused."""

from __future__ import annotations

import select
import ssl
import threading

from conveyor.connect.sinks.http11 import Connection, StaleConnection

__all__ = ["Pool", "with_length"]


def with_length(head: bytes, body: bytes) -> bytes:
    """``head`` (the request line and headers up to the Content-Length value) completed for
    ``body``."""
    return head + str(len(body)).encode("ascii") + b"\r\n\r\n"


class Pool:
    """Keep-alive connections to one origin: at most ``size``, each used by one thread at a
    time (a thread waits on a semaphore while all are busy)."""

    def __init__(self, host: str, port: int, https: bool, size: int, timeout: float) -> None:
        self._host, self._port = host, port
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
            # Readable while idle means the server closed it (or broke the protocol). poll,
            # not select: select refuses descriptors above 1023, which a busy process has.
            if sock is not None:
                idle = select.poll()
                idle.register(sock, select.POLLIN)
                if not idle.poll(0):
                    return connection
            connection.close()

    def take(self, wait: bool = True) -> Connection | None:
        """A connection for one request (one of the pool's ``size`` slots), or ``None`` when
        all are busy and ``wait`` is False; hand it back with :meth:`give_back`."""
        if not self._slots.acquire(blocking=wait):
            return None
        try:
            return self._connection()
        except BaseException:
            self._slots.release()
            raise

    def give_back(self, connection: Connection) -> None:
        """End a request: its connection is kept for the next when still open."""
        if connection.open:
            with self._lock:
                self._idle.append(connection)
        self._slots.release()

    def fresh(self) -> Connection:
        """A new connection (opened when used), in place of one found closed."""
        return Connection(self._host, self._port, self._timeout, self._context)

    def post(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` after ``head`` (the request line and headers up to the
        Content-Length value); the status and the response body (raises ``OSError`` when no
        answer came)."""
        request_head = with_length(head, body)
        connection = self.take()
        assert connection is not None
        try:
            try:
                return connection.request(request_head, body)
            except StaleConnection:  # closed by the server meanwhile: nothing was taken
                connection = self.fresh()
                return connection.request(request_head, body)
        finally:
            self.give_back(connection)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
