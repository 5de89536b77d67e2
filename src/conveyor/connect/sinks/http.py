"""``Webhook``: records POSTed as JSON over a pool of keep-alive HTTP/1.1 connections.

The connections are Conveyor's own minimal HTTP/1.1 client (``http11``): ~32 µs of CPU per
request where the standard library's ``http.client`` takes ~88 µs (its header parsing) and
httpx ~340 µs; at 2,400 records a second on 2 cores that was the difference between keeping
up and falling behind (see bench/connector_latency.py). The pool of them is ``http_pool``; a
batch POSTed with its keys side by side is ``side_by_side``."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from conveyor.connect.sink import Reject, Result, Retry
from conveyor.connect.sinks.http_pool import Pool
from conveyor.connect.sinks.records import encoded_record, record_json
from conveyor.connect.sinks.side_by_side import DeliveredAhead, NotSent, SideBySide
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
    POSTed meanwhile are not POSTed again when the route retries. A Webhook serves one route.

    Args:
        url: where to POST (``http://`` or ``https://``).
        batch: POST each batch as one JSON array instead of a request per record.
        concurrency: keep-alive connections, at most (the lanes share them).
        timeout: seconds per connect and per read.
        headers: sent with every request (an ``Authorization`` header, say).
        encode: shapes a request's body, ``encode(record) -> dict``.
    """

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
        self._pool: Pool | None = None
        # Told by the route (use_route); outside one: one record after another, and a Reject
        # is final (nobody would retry it).
        self._topic: str | None = None  # the route's
        self._ordering = "partition"
        self._dead_letters = True
        self._ahead = DeliveredAhead()

    def open(self) -> None:
        https, host, port, _ = _origin(self.url)
        self._pool = Pool(host, port, https, self.concurrency, self.timeout)
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
        route = (topic, ordering, dead_letters)
        if self._topic is not None and (self._topic, self._ordering, self._dead_letters) != route:
            raise ConfigurationError(
                f"this Webhook serves the route of {self._topic!r} already; give the route "
                f"of {topic!r} a Webhook of its own",
                "sink",
            )
        self._topic, self._ordering, self._dead_letters = route

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        # What is known already is not POSTed: a record that cannot be encoded (Reject), and
        # one POSTed side by side beyond a record that failed (see DeliveredAhead).
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
        ordering = self._ordering
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
                posted = SideBySide(
                    pool, self._head, queues, bodies, self.timeout, _verdict, self._stops
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
        return isinstance(result, Reject) and not self._dead_letters

    def _settled(self, records: Sequence[Message], posted: list[Result | NotSent]) -> list[Result]:
        """The answer in the serial form: what was delivered (or rejected for good) up to the
        first record that was not, then a Retry for every record after it; those beyond it
        that were answered are remembered, so that the route's next attempt does not POST
        them again."""
        failed = next(
            (
                index
                for index, answer in enumerate(posted)
                if isinstance(answer, NotSent) or self._stops(answer)
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
                if not isinstance(answer, NotSent) and not self._stops(answer)
            },
        )
        first = posted[failed]
        return [
            *cast("list[Result]", posted[:failed]),
            _UNSENT if isinstance(first, NotSent) else first,
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


_AFTER_FAILURE = Retry("after an earlier record")
_UNSENT = Retry("not sent: the endpoint could not be reached")
