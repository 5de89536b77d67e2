"""``Webhook``: records POSTed as JSON over a pool of keep-alive HTTP/1.1 connections.

The connections are Conveyor's own minimal HTTP/1.1 client (``http11``): ~32 µs of CPU per
request where the standard library's ``http.client`` takes ~88 µs (its header parsing) and
httpx ~340 µs; at 2,400 records a second on 2 cores that was the difference between keeping
up and falling behind (see bench/connector_latency.py)."""

from __future__ import annotations

import select
import ssl
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast
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
    try:
        parts.hostname.encode("idna")  # what connecting does (a label over 63 characters fails)
    except UnicodeError as error:
        raise ConfigurationError(
            f"the webhook url's host is malformed: {url!r} ({error})", "url"
        ) from None
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
        request_head = head + str(len(body)).encode("ascii") + b"\r\n\r\n"
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


class Webhook:
    """POSTs each record (or, with ``batch=True``, each batch as a JSON array) to ``url``.

    2xx: delivered. 4xx: rejected (to the dead letter queue, with the status and the start
    of the response). 5xx, timeouts and connection errors: retried after the route's back-off
    (with ``batch=False``, from the record that failed; those before it count as delivered).
    ``concurrency`` bounds the pool's keep-alive connections (lanes share them); ``timeout``
    is per connect and per read. ``encode(record) -> dict`` shapes the body (a record it
    cannot encode is rejected).

    With ``batch=False`` on a route whose ordering is ``"key"`` (the default), a lane POSTs
    the records of different keys in its batch side by side (one key's one after another;
    with ``"none"`` every record), from its one thread: one lane keeps many requests in
    flight, so a few lanes do what many did (threads waiting on sockets cost GIL hand-overs).
    A record that fails stops its key (without a dead letter queue a 4xx too: the route
    retries it); a request that cannot be sent at all stops the batch; records of other keys
    POSTed meanwhile are not POSTed again when the route retries. A Webhook serves one route."""

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
        self._route: tuple[str, str, bool] | None = None  # (topic, ordering, dead letters)
        self._ahead = _DeliveredAhead()

    def open(self) -> None:
        self._pool = _Pool(self.url, self.concurrency, self.timeout)
        self._ahead.clear()

    def use_route(self, topic: str, ordering: str, dead_letters: bool) -> None:
        """Called by the route the sink serves (see :mod:`conveyor.connect.sink`). With
        ordering ``"key"`` a batch's records of different keys are POSTed side by side (one
        key's one after another), with ``"none"`` all of them; with ``"partition"``, or used
        outside a route, one after another. Without ``dead_letters`` a 4xx is no final answer
        (the route retries it), so it stops what comes after it like a 5xx.

        Raises:
            ConfigurationError: the Webhook serves a route already (give each its own).
        """
        if self._route is not None and self._route != (topic, ordering, dead_letters):
            raise ConfigurationError(
                f"this Webhook serves the route of {self._route[0]!r} already; give the route "
                f"of {topic!r} a Webhook of its own",
                "sink",
            )
        self._route = (topic, ordering, dead_letters)

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        # What is known already is not POSTed: a record that cannot be encoded (Reject), and
        # one POSTed side by side beyond a record that failed (see _DeliveredAhead).
        bodies: list[bytes | Result] = []
        known = self._ahead.recall(records)
        for index, record in enumerate(records):
            if index in known:
                bodies.append(known[index])
                continue
            try:
                bodies.append(encoded_record(record, self._encode))
            except Exception as error:
                bodies.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))
        if self.batch:
            good = [body for body in bodies if isinstance(body, bytes)]
            verdict = self._post(b"[" + b",".join(good) + b"]") if good else None
            return [verdict if isinstance(body, bytes) else body for body in bodies]
        ordering = self._route[1] if self._route is not None else "partition"
        if len(records) > 1 and ordering != "partition":
            # Records that may go side by side share no queue: every record under "none",
            # each key's under "key".
            queues: list[Hashable] = (
                [record.offset for record in records]
                if ordering == "none"
                else [record.raw_key for record in records]
            )
            if ordering == "none" or any(queue != queues[0] for queue in queues):
                pool = self._pool
                assert pool is not None, "the sink is not open"
                posted = _SideBySide(
                    pool, self._head, queues, bodies, self.timeout, self._stops
                ).run()
                return self._settled(records, posted)
        results: list[Result] = []
        for body in bodies:
            result = self._post(body) if isinstance(body, bytes) else body
            results.append(result)
            if self._stops(result):
                results.extend(_AFTER_FAILURE for _ in bodies[len(results) :])
                break
        return results

    def _stops(self, result: Result) -> bool:
        """Whether ``result`` leaves its record undelivered, so that what comes after it in
        its key (or batch) must wait: a Retry, or a Reject the route retries (no DLQ)."""
        if isinstance(result, Retry):
            return True
        dead_letters = self._route is None or self._route[2]
        return isinstance(result, Reject) and not dead_letters

    def _settled(self, records: Sequence[Message], posted: list[Result | _NotSent]) -> list[Result]:
        """The answer in the serial form: what was delivered (or rejected for good) up to the
        first record that was not, then a Retry for every record after it; those beyond it
        that were answered are remembered, so that the route's next attempt does not POST
        them again."""
        failed = next(
            (
                index
                for index, answer in enumerate(posted)
                if isinstance(answer, _NotSent) or self._stops(answer)
            ),
            None,
        )
        if failed is None:
            return cast("list[Result]", posted)  # all answered, none unsent
        self._ahead.remember(
            records,
            {
                index: answer
                for index, answer in enumerate(posted[failed + 1 :], failed + 1)
                if not isinstance(answer, _NotSent) and not self._stops(answer)
            },
        )
        first = posted[failed]
        return [
            *cast("list[Result]", posted[:failed]),
            _UNSENT if isinstance(first, _NotSent) else first,
            *(_AFTER_FAILURE for _ in posted[failed + 1 :]),
        ]

    def _post(self, body: bytes) -> Result:
        pool = self._pool
        assert pool is not None, "the sink is not open"
        try:
            status, answer = pool.post(self._head, body)
        except OSError as error:  # HTTPError (a broken answer) too
            return Retry(f"{type(error).__name__}: {error}")
        return _verdict(status, answer)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _verdict(status: int, answer: bytes) -> Result:
    """What an HTTP answer means for the record: delivered, rejected (4xx) or retried."""
    if status < 300:
        return None
    reason = f"HTTP {status}: {answer[:200].decode('utf-8', 'replace')}"
    return Reject(reason) if 400 <= status < 500 else Retry(reason)


class _InFlight(NamedTuple):
    connection: Connection
    queue: Hashable
    position: int
    reused: bool
    head: bytes
    deadline: float


class _SideBySide:
    """One batch POSTed a record per request, its queues side by side: each queue's records
    one after another, the queues' requests in flight together on the pool's connections, all
    from the calling thread (one ``poll`` waits for whichever answer comes first; a poll
    object, unlike epoll, costs no system calls to set up and to register sockets with).

    A record that fails (``stops``) stops its queue: the records after it are not sent. A
    request that cannot be sent at all (the endpoint refuses or does not accept connections)
    stops the batch, so that one unreachable endpoint costs one connect timeout, not one per
    queue. Each request waits ``timeout`` for its answer. :meth:`run` answers per record:
    delivered, rejected, retried, or not sent."""

    def __init__(
        self,
        pool: _Pool,
        head: bytes,
        queues: list[Hashable],
        bodies: list[bytes | Result],
        timeout: float,
        stops: Callable[[Result], bool],
    ) -> None:
        self._pool = pool
        self._head = head
        self._bodies = bodies
        self._timeout = timeout
        self._stops = stops
        self._queues: dict[Hashable, deque[int]] = {}
        for index, queue in enumerate(queues):
            self._queues.setdefault(queue, deque()).append(index)
        self._results: list[Result | _NotSent] = [_NOT_SENT] * len(bodies)
        self._poller = select.poll()
        self._in_flight: dict[int, _InFlight] = {}  # by socket descriptor
        self._unreachable = False

    def run(self) -> list[Result | _NotSent]:
        ready = deque(self._queues)  # queues whose next record waits for a connection
        try:
            while (ready and not self._unreachable) or self._in_flight:
                while ready and not self._unreachable:
                    index = self._next(ready[0])
                    if index is None:  # nothing (more) to send in this queue
                        ready.popleft()
                        continue
                    # Wait for a slot only while holding none: lanes share the pool.
                    connection = self._pool.take(wait=not self._in_flight)
                    if connection is None:
                        break
                    self._send(ready.popleft(), index, connection)
                if not self._in_flight:
                    continue
                soonest = min(request.deadline for request in self._in_flight.values())
                wait = max(0.0, soonest - time.monotonic())
                for descriptor, _ in self._poller.poll(wait * 1000):
                    request = self._in_flight.pop(descriptor)
                    self._poller.unregister(descriptor)
                    if self._answer(request) and self._queues[request.queue]:
                        ready.append(request.queue)  # its next record may go now
                self._expire(time.monotonic())
        finally:  # (an exception: what is in flight is abandoned, its slots handed back)
            for request in self._in_flight.values():
                request.connection.close()
                self._pool.give_back(request.connection)
            self._in_flight.clear()
        return self._results

    def _next(self, queue: Hashable) -> int | None:
        """The next record of ``queue`` to POST (left in the queue), answering on the way
        the records known without a POST; None when there is none."""
        waiting = self._queues[queue]
        while waiting:
            index = waiting[0]
            body = self._bodies[index]
            if isinstance(body, bytes):
                return index
            waiting.popleft()
            if self._stops(body):
                self._failed(queue, index, body)
                return None
            self._results[index] = body
        return None

    def _send(self, queue: Hashable, index: int, connection: Connection) -> None:
        self._queues[queue].popleft()
        body = self._bodies[index]
        assert isinstance(body, bytes)
        head = self._head + str(len(body)).encode("ascii") + b"\r\n\r\n"
        try:
            try:
                reused = connection.send(head, body)
            except StaleConnection:  # closed by the server while idle: nothing was taken
                connection = self._pool.fresh()
                reused = connection.send(head, body)
        except OSError as error:
            self._pool.give_back(connection)
            self._failed(queue, index, Retry(f"{type(error).__name__}: {error}"))
            self._unreachable = True
            return
        except BaseException:
            self._pool.give_back(connection)
            raise
        self._wait_for(_InFlight(connection, queue, index, reused, head, self._deadline()))

    def _deadline(self) -> float:
        return time.monotonic() + self._timeout

    def _wait_for(self, request: _InFlight) -> None:
        sock = request.connection.sock
        assert sock is not None
        descriptor = sock.fileno()
        self._in_flight[descriptor] = request
        self._poller.register(descriptor, select.POLLIN)

    def _answer(self, request: _InFlight) -> bool:
        """Read the answer to ``request``; False when it is in flight again instead (sent
        again on a new connection: the reused one had been closed before it was read)."""
        connection = request.connection
        try:
            status, answer = connection.receive(request.reused)
        except StaleConnection:
            fresh = self._pool.fresh()
            body = self._bodies[request.position]
            assert isinstance(body, bytes)
            try:
                fresh.send(request.head, body)
            except OSError as error:
                self._pool.give_back(fresh)
                self._failed(
                    request.queue, request.position, Retry(f"{type(error).__name__}: {error}")
                )
                self._unreachable = True
                return True
            except BaseException:
                self._pool.give_back(fresh)
                raise
            self._wait_for(
                request._replace(connection=fresh, reused=False, deadline=self._deadline())
            )
            return False
        except OSError as error:  # HTTPError (a broken answer) too
            self._pool.give_back(connection)
            self._failed(request.queue, request.position, Retry(f"{type(error).__name__}: {error}"))
            return True
        except BaseException:
            self._pool.give_back(connection)  # (closed by receive)
            raise
        self._pool.give_back(connection)
        result = _verdict(status, answer)
        if self._stops(result):
            self._failed(request.queue, request.position, result)
        else:
            self._results[request.position] = result
        return True

    def _expire(self, now: float) -> None:
        """Give up on the requests whose answer is later than ``timeout``."""
        late = [d for d, request in self._in_flight.items() if request.deadline <= now]
        for descriptor in late:
            request = self._in_flight.pop(descriptor)
            self._poller.unregister(descriptor)
            request.connection.close()  # an answer may still come: never reuse it
            self._pool.give_back(request.connection)
            reason = f"timed out: no answer in {self._timeout:g} s"
            self._failed(request.queue, request.position, Retry(reason))

    def _failed(self, queue: Hashable, index: int, result: Result) -> None:
        """A record not delivered: its queue stops here."""
        self._results[index] = result
        self._queues[queue].clear()


class _NotSent:
    """A record whose queue stopped before it, or whose batch stopped (unreachable)."""


_NOT_SENT = _NotSent()
_AFTER_FAILURE = Retry("after an earlier record")
_UNSENT = Retry("not sent: the endpoint could not be reached")


class _DeliveredAhead:
    """Records POSTed side by side beyond one that failed, with their answers (delivered or
    rejected). The route delivers the batch again from the record that failed; these are
    answered from here instead of being POSTed a second time. At most ``size`` are kept, the
    oldest forgotten first (a forgotten record is POSTed again, as at least once allows: so is
    one whose partition moved to another process meanwhile)."""

    def __init__(self, size: int = 100_000) -> None:
        self._answers: OrderedDict[tuple[str, int, int], Result] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def remember(self, records: Sequence[Message], answers: dict[int, Result]) -> None:
        with self._lock:
            for index, answer in answers.items():
                record = records[index]
                self._answers[(record.topic, record.partition, record.offset)] = answer
            while len(self._answers) > self._size:
                self._answers.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()

    def recall(self, records: Sequence[Message]) -> dict[int, Result]:
        """The answers known for ``records``, by index (each answered once, then forgotten)."""
        if not self._answers:  # nearly always: nothing failed
            return {}
        found: dict[int, Result] = {}
        with self._lock:
            for index, record in enumerate(records):
                answer = self._answers.pop(
                    (record.topic, record.partition, record.offset), _NOT_SENT
                )
                if not isinstance(answer, _NotSent):
                    found[index] = answer
        return found
