"""``Job``: a function made a background job by ``@app.job(...)``; what it enqueues, and what a
running job knows of itself (:func:`current_job`)."""

from __future__ import annotations

import contextvars
import functools
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from conveyor.errors import TransactionError
from conveyor.jobs.wire import ATTEMPT, ID, NAME, encode
from conveyor.producer.transactions import open_transaction

if TYPE_CHECKING:
    from conveyor.jobs.queues import Queue
    from conveyor.producer import Producer

__all__ = ["Enqueuer", "Job", "JobContext", "current_job"]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class JobContext:
    """What a running job knows of itself: its ``id`` (the same across its retries: an
    idempotency key), ``name``, ``queue``, ``attempt`` (1 the first time), ``key`` (or
    ``None``) and ``enqueued_at`` (an aware datetime)."""

    id: str
    name: str
    queue: str
    attempt: int
    key: str | None
    enqueued_at: datetime


_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "conveyor_job", default=None
)


def current_job() -> JobContext | None:
    """The job running in this thread (or task), or ``None`` outside a job."""
    return _current.get()


class Job(Generic[P, R]):
    """A function that runs in the background: ``enqueue`` it, it runs on a consumer of its
    queue's topic (calling the job itself runs the function here and now).

    ``retries`` attempts after the first, each ``backoff`` seconds times 2 to the power of the
    attempts before it (capped by ``max_backoff``) later, through scheduled messages (the
    partition goes on meanwhile); then the job goes to its queue's dead-job topic.
    ``timeout``: seconds a job may run before it is stopped (an ``async def`` job cancelled, a
    plain one interrupted by :class:`~conveyor.jobs.JobTimeoutError` raised in its thread) and
    retried like any failure.

    An enqueue inside a consumer's ``with self.transaction():`` (or ``async with``) is part
    of the transaction: the job runs only if the transaction commits."""

    def __init__(
        self,
        function: Callable[P, R],
        name: str,
        queue: Queue,
        retries: int,
        backoff: float,
        max_backoff: float,
        timeout: float | None,
    ) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.name = name
        self.queue = queue
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(function)
        self.takes_key = _takes_key(function)
        """Whether the function has a parameter named ``key``: then ``enqueue(key=...)``
        passes it to the function, and only :meth:`options` sets the message key."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def options(self, *, key: str | bytes | None = None) -> Enqueuer[P]:
        """This job's ``enqueue`` methods with options for the message they send: ``key``
        keeps one key's jobs in order (one partition); every keyword of theirs then goes to
        the function, a parameter named ``key`` too.

        Example::

            send.options(key="customer-7").enqueue(key="welcome")  # send(key="welcome")
        """
        return Enqueuer(self, key)

    def enqueue(self, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """Send the job to its queue now; returns its id once the broker has it. ``key=``
        keeps one key's jobs in order (the message key, not passed to the function), unless
        the function has a parameter named ``key``: then use :meth:`options`."""
        key, rest = self._message_key(kwargs)
        return self._send(None, key, args, rest)

    async def enqueue_async(self, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """:meth:`enqueue` for ``async def`` code (an ``async def consume()``): awaits the
        broker's acknowledgement without holding the event loop; returns the job's id."""
        key, rest = self._message_key(kwargs)
        return await self._send_async(key, args, rest)

    def enqueue_in(self, delay: float, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """Send the job to run ``delay`` seconds from now (a scheduled message: an app with
        jobs dispatches them); returns its id."""
        key, rest = self._message_key(kwargs)
        return self._send(time.time() + float(delay), key, args, rest)

    def enqueue_at(self, when: datetime | float, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """Send the job to run at ``when`` (an aware datetime or epoch seconds); returns its id."""
        key, rest = self._message_key(kwargs)
        return self._send(_moment(when), key, args, rest)

    def _message_key(self, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The message key given as ``key=`` (``None`` when the function takes ``key``
        itself), and the function's keyword arguments."""
        if self.takes_key or "key" not in kwargs:
            return None, kwargs
        rest = dict(kwargs)
        return rest.pop("key"), rest

    def _message(
        self, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        envelope, payload = encode(self.name, args, kwargs)
        headers = [(NAME, self.name), (ID, envelope.id), (ATTEMPT, "1")]
        return envelope.id, {
            "topic": self.queue.topic,
            "payload": payload,
            "key": key,
            "headers": headers,
        }

    def _producer(self) -> Producer:
        """The app's producer, or inside a transaction of the app's transactional producer
        (a consumer's ``self.transaction()``), that one: the job joins the transaction."""
        app = self.queue.jobs.app
        if open_transaction() is None:
            return app.producer
        producer = app.transactional_producer
        if not producer.transactions.active():
            raise TransactionError(
                f"{self.name}.enqueue inside a transaction of another producer than the app's: "
                "a job joins only the app's transactions (a consumer's self.transaction())"
            )
        return producer

    def _send(
        self, at: float | None, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> str:
        job_id, message = self._message(key, args, kwargs)
        producer = self._producer()
        if at is None:
            producer.produce_sync(**message)
        else:
            producer.produce_at(
                datetime.fromtimestamp(at, tz=UTC),
                **message,
                id=f"job-{job_id}",
                schedules_topic=self.queue.jobs.app.schedules.topic,
            )
        return job_id

    async def _send_async(self, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        job_id, message = self._message(key, args, kwargs)
        await self._producer().produce_async(**message)
        return job_id

    def delay_before(self, attempt: int) -> float:
        """Seconds before ``attempt`` (2 and later) runs."""
        return float(min(self.max_backoff, self.backoff * 2.0 ** (attempt - 2)))

    def __repr__(self) -> str:
        return f"<Job {self.name} on {self.queue.name}>"


class Enqueuer(Generic[P]):
    """What :meth:`Job.options` returns: the job's ``enqueue`` methods with options for the
    message (its ``key``); their keywords all go to the function."""

    __slots__ = ("job", "key")

    def __init__(self, job: Job[P, Any], key: str | bytes | None) -> None:
        self.job = job
        self.key = key

    def enqueue(self, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """:meth:`Job.enqueue` with these options."""
        return self.job._send(None, self.key, args, kwargs)

    async def enqueue_async(self, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """:meth:`Job.enqueue_async` with these options."""
        return await self.job._send_async(self.key, args, kwargs)

    def enqueue_in(self, delay: float, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """:meth:`Job.enqueue_in` with these options."""
        return self.job._send(time.time() + float(delay), self.key, args, kwargs)

    def enqueue_at(self, when: datetime | float, /, *args: P.args, **kwargs: P.kwargs) -> str:
        """:meth:`Job.enqueue_at` with these options."""
        return self.job._send(_moment(when), self.key, args, kwargs)

    def __repr__(self) -> str:
        return f"<Enqueuer {self.job.name} key={self.key!r}>"


def _moment(when: datetime | float) -> float:
    return when.timestamp() if isinstance(when, datetime) else float(when)


def _takes_key(function: Callable[..., Any]) -> bool:
    """Whether ``function`` has a parameter ``key`` that a keyword can be passed to."""
    try:
        parameter = inspect.signature(function).parameters.get("key")
    except (TypeError, ValueError):  # no signature to read (a builtin)
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )
