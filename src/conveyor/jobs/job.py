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

from conveyor.jobs.wire import ATTEMPT, ID, NAME, encode

if TYPE_CHECKING:
    from conveyor.jobs.queues import Queue
    from conveyor.producer import DeliveryReport

__all__ = ["Job", "JobContext", "current_job"]

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
    retried like any failure."""

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

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Send the job to its queue now; returns its id once the broker has it. ``key=``
        (a keyword of its own, not passed to the function) keeps one key's jobs in order."""
        key = kwargs.pop("key", None)
        return self._send(None, key, args, kwargs)

    def enqueue_in(self, delay: float, *args: P.args, **kwargs: P.kwargs) -> str:
        """Send the job to run ``delay`` seconds from now (a scheduled message: an app with
        jobs dispatches them); returns its id."""
        key = kwargs.pop("key", None)
        return self._send(time.time() + float(delay), key, args, kwargs)

    def enqueue_at(self, when: datetime | float, *args: P.args, **kwargs: P.kwargs) -> str:
        """Send the job to run at ``when`` (an aware datetime or epoch seconds); returns its id."""
        key = kwargs.pop("key", None)
        moment = when.timestamp() if isinstance(when, datetime) else float(when)
        return self._send(moment, key, args, kwargs)

    def _send(
        self, at: float | None, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> str:
        envelope, payload = encode(self.name, args, kwargs)
        headers = [(NAME, self.name), (ID, envelope.id), (ATTEMPT, "1")]
        producer = self.queue.jobs.app.producer
        if at is None:
            report: DeliveryReport = producer.produce_sync(
                topic=self.queue.topic, payload=payload, key=key, headers=headers
            )
            del report
        else:
            producer.produce_at(
                datetime.fromtimestamp(at, tz=UTC), topic=self.queue.topic, payload=payload,
                key=key, headers=headers, id=f"job-{envelope.id}",
                schedules_topic=self.queue.jobs.app.schedules.topic,
            )  # fmt: skip
        return envelope.id

    def delay_before(self, attempt: int) -> float:
        """Seconds before ``attempt`` (2 and later) runs."""
        return float(min(self.max_backoff, self.backoff * 2.0 ** (attempt - 2)))

    def __repr__(self) -> str:
        return f"<Job {self.name} on {self.queue.name}>"
