"""One lane batch POSTed with its keys side by side (the Webhook with a request per record), and
the memory of records POSTed beyond one that failed."""

from __future__ import annotations

import select
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from conveyor.connect.sink import Result, Retry
from conveyor.connect.sinks.http11 import Connection, StaleConnection
from conveyor.connect.sinks.http_pool import Pool, with_length

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["NOT_SENT", "DeliveredAhead", "NotSent", "SideBySide"]


class _InFlight(NamedTuple):
    connection: Connection
    queue: Hashable
    position: int
    reused: bool
    head: bytes
    deadline: float


class SideBySide:
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
        pool: Pool,
        head: bytes,
        queues: list[Hashable],
        bodies: list[bytes | Result],
        timeout: float,
        verdict: Callable[[int, bytes], Result],
        stops: Callable[[Result], bool],
    ) -> None:
        self._pool = pool
        self._verdict = verdict
        self._head = head
        self._bodies = bodies
        self._timeout = timeout
        self._stops = stops
        self._queues: dict[Hashable, deque[int]] = {}
        for index, queue in enumerate(queues):
            self._queues.setdefault(queue, deque()).append(index)
        self._results: list[Result | NotSent] = [NOT_SENT] * len(bodies)
        self._poller = select.poll()
        self._in_flight: dict[int, _InFlight] = {}  # by socket descriptor
        self._unreachable = False

    def run(self) -> list[Result | NotSent]:
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
        head = with_length(self._head, body)
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
        result = self._verdict(status, answer)
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


class NotSent:
    """A record whose queue stopped before it, or whose batch stopped (unreachable)."""


NOT_SENT = NotSent()


class DeliveredAhead:
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
                    (record.topic, record.partition, record.offset), NOT_SENT
                )
                if not isinstance(answer, NotSent):
                    found[index] = answer
        return found
