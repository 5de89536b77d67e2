"""``app.jobs``: the job queues of an app (a topic each, consumed by the app itself) and the
consumer that runs their jobs.

A job runs once per message, at least once: the message is marked after the job returned
(or after its retry or its death was stored), each job on its own, and a queue commits what
was marked every ``commit_interval`` (0.1 s by default, not the app's 5 s): a crash runs again
the jobs that were running and those that ended in its last moments. A job that raises is
sent again for later (``produce_at``: the partition goes on with the next jobs meanwhile),
with its attempt in its headers, until its retries are spent; then it goes to the queue's
dead-job topic with its last error. The retry and the death are scheduled messages (a death
due at once), each committed with the message's offset in one Kafka transaction of the app's
transactional producer, so that a crash replays neither or both (in lanes, where transactions
are not available, the record is stored first; a schedule is named by the job's id and
attempt, so one replayed before it was sent replaces it). Arguments that do not fit the function's signature and type hints, a job
name the app does not know, and a message that is no job's (its envelope or its attempt
header malformed) go there at once: no retry changes them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from conveyor.consumer import Consumer
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.hook_results import run_hook
from conveyor.instrumentation import events as ev
from conveyor.jobs.job import Job, JobContext, _current
from conveyor.jobs.watchdog import Watchdog
from conveyor.jobs.wire import ID, NAME, attempt_of, dead_headers, decode, header, retry_headers
from conveyor.models.arguments import ArgumentChecker

if TYPE_CHECKING:
    from conveyor.messages import Message
    from conveyor.routing.host import RoutedHost
    from conveyor.routing.options import TopicOptions
    from conveyor.schedules.dispatcher import Schedules

    class SchedulingHost(RoutedHost, Protocol):
        """A host with routes and scheduled messages (delayed jobs and retries are those)."""

        @property
        def schedules(self) -> Schedules: ...


__all__ = ["Jobs", "Queue", "UnknownJobError"]

_log = logging.getLogger("conveyor.jobs")
_watchdog = Watchdog()  # interrupts plain jobs past their timeout
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
COMMIT_INTERVAL = 0.1
"""Seconds between a queue's offset commits (a route's ``auto.commit.interval.ms``): jobs are
side effects, so a crash should run again as few finished ones as it can."""
F = TypeVar("F", bound=Callable[..., Any])


class UnknownJobError(ConveyorError, LookupError):
    """A job message names a job this app does not have.

    Raised when a worker reads a job whose name no ``@app.job`` of its app registers (a job
    renamed or removed since it was enqueued, or enqueued by another app); never in your
    code: the job goes to the dead-job topic at once with this error. Also a ``LookupError``.

    What to do: deploy the job again under its old name (``@app.job(name=...)``), then
    redrive its dead jobs from the web UI; or discard them.
    """


@dataclass
class Queue:
    """One queue: its topic, its dead-job topic, its jobs."""

    jobs: Jobs
    name: str
    topic: str
    dead_topic: str
    dismissed_topic: str
    """Where dead jobs that were discarded are noted (compacted, keyed ``partition:offset``)."""
    by_name: dict[str, Job[Any, Any]] = field(default_factory=dict)
    checkers: dict[str, ArgumentChecker] = field(default_factory=dict)


class Jobs:
    """The background jobs of an app (``app.jobs``; ``@app.job(...)`` registers one).

    Each queue is a topic (``jobs-<queue>``, with ``jobs-<queue>-dead`` for the jobs that
    died) read by the app in its own subscription group; ``queue(...)`` sets its partitions
    and lanes before its first job. Delayed jobs and retries go through scheduled messages,
    which the app dispatches (``app.schedules`` is enabled with the first job)."""

    def __init__(self, app: SchedulingHost) -> None:
        self.app = app
        self.queues: dict[str, Queue] = {}

    def queue(
        self,
        name: str,
        *,
        partitions: int = 3,
        replication_factor: int | None = None,
        lanes: int | None = None,
        commit_interval: float = COMMIT_INTERVAL,
    ) -> Queue:
        """Declare queue ``name``: its topic's ``partitions``, ``lanes`` (virtual partitions:
        that many jobs of one partition at once, one key's jobs still in order) and
        ``commit_interval`` (seconds between commits of the jobs done: after a crash, those of
        about the last interval run again; 0.1 s by default).

        Raises:
            ConfigurationError: a bad name or setting, or the queue declared twice.
        """
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"a job queue's name is letters, digits, '.', '_' and '-', got {name!r}", "queue"
            )
        if name in self.queues:
            raise ConfigurationError(f"the job queue {name!r} is declared twice", "queue")
        if lanes is not None and (
            isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1
        ):
            raise ConfigurationError(f"lanes must be an integer >= 1, got {lanes!r}", "lanes")
        if (
            isinstance(commit_interval, bool)
            or not isinstance(commit_interval, int | float)
            or not 0 < commit_interval <= 60
        ):
            raise ConfigurationError(
                f"commit_interval must be seconds > 0 and <= 60, got {commit_interval!r}",
                "commit_interval",
            )
        queue = Queue(
            self, name, f"jobs-{name}", f"jobs-{name}-dead", f"jobs-{name}-dead-discarded"
        )
        self.queues[name] = queue
        self._route(queue, partitions, replication_factor, lanes, float(commit_interval))
        return queue

    def job(
        self,
        *,
        name: str | None = None,
        queue: str = "default",
        retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        timeout: float | None = None,
    ) -> Callable[[Callable[..., Any]], Job[Any, Any]]:
        """Make the decorated function a job of ``queue`` (declared with its defaults if new).

        Raises:
            ConfigurationError: a bad setting, or a job name used twice.
        """
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"retries must be an integer >= 0, got {retries!r}", "retries")
        for setting, value in (
            ("backoff", backoff),
            ("max_backoff", max_backoff),
            ("timeout", timeout),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
            ):
                raise ConfigurationError(f"{setting} must be seconds > 0, got {value!r}", setting)

        def register(function: Callable[..., Any]) -> Job[Any, Any]:
            job_name = name or f"{function.__module__}.{function.__qualname__}"
            target = self.queues.get(queue) or self.queue(queue)
            if any(job_name in q.by_name for q in self.queues.values()):
                raise ConfigurationError(f"the job name {job_name!r} is used twice", "name")
            job: Job[Any, Any] = Job(
                function,
                job_name,
                target,
                retries,
                float(backoff),
                float(max_backoff),
                None if timeout is None else float(timeout),
            )
            target.by_name[job_name] = job
            target.checkers[job_name] = ArgumentChecker(function)
            return job

        return register

    def _route(
        self,
        queue: Queue,
        partitions: int,
        replication_factor: int | None,
        lanes: int | None,
        commit_interval: float,
    ) -> None:
        runner = type(f"JobRunner[{queue.name}]", (JobRunner,), {"queue": queue})
        options: TopicOptions = {
            "partitions": partitions,
            "replication_factor": replication_factor,
            # Commits come from the listener's loop, which runs at least each max_wait_time:
            # with an idle queue too, the last jobs' offsets go within about one interval.
            "kafka": {"auto.commit.interval.ms": max(1, round(commit_interval * 1000))},
            "max_wait_time": min(commit_interval, self.app.settings.max_wait_time),
        }
        if lanes is not None:
            options["virtual_partitions"] = {"max_partitions": lanes, "partitioner": _job_key}
        routes = self.app.routes
        with routes.subscription_group(f"jobs-{queue.name}"):
            routes.topic(queue.topic, runner, **options)
        routes.topic(
            queue.dead_topic,
            None,
            active=False,
            partitions=partitions,
            replication_factor=replication_factor,
        )
        routes.topic(
            queue.dismissed_topic,
            None,
            active=False,
            partitions=1,
            replication_factor=replication_factor,
            config={"cleanup.policy": "compact"},
        )
        self.app.schedules.ensure_enabled()  # delayed jobs and retries are scheduled messages


def _job_key(message: Message) -> Any:
    """A job's lane: its key (one key's jobs in order), else its offset (any lane)."""
    key = message.raw_key
    return key if key is not None else message.offset


class JobRunner(Consumer):
    """Runs the jobs of one queue (a subclass per queue names it)."""

    queue: Queue

    def consume(self) -> None:
        for message in self.messages:
            self._run(message)
            # each job marked as it ends: a crash runs again the jobs in flight, not the batch
            self.mark_as_consumed(message)

    def _run(self, message: Message) -> None:
        queue = self.queue
        raw_headers = message.raw_headers
        try:
            attempt = attempt_of(raw_headers)
        except ValueError as error:  # read again, it would fail again: dead at once
            self._dead(message, raw_headers, None, error)
            return
        try:
            envelope = decode(message.raw_payload)
        except ValueError as error:
            self._dead(message, raw_headers, attempt, error)
            return
        job = queue.by_name.get(envelope.name)
        if job is None:
            self._dead(
                message,
                raw_headers,
                attempt,
                UnknownJobError(f"no job named {envelope.name!r} in queue {queue.name!r}"),
            )
            return
        try:
            args, kwargs = queue.checkers[job.name].check(envelope.args, envelope.kwargs)
        except TypeError as error:  # InvalidArguments: no retry makes them fit
            self._dead(message, raw_headers, attempt, error)
            return
        context = JobContext(
            envelope.id,
            job.name,
            queue.name,
            attempt,
            None if message.raw_key is None else message.raw_key.decode("utf-8", "replace"),
            datetime.fromtimestamp(envelope.enqueued_at / 1000, tz=UTC),
        )
        token = _current.set(context)
        started = time.perf_counter()
        try:
            self._call(job, args, kwargs)
        except Exception as error:
            _log.warning(
                "job %s (%s) failed on attempt %s: %r", job.name, envelope.id, attempt, error
            )
            self._event(
                ev.ERROR_OCCURRED,
                type="job.failed",
                error=error,
                job=job.name,
                id=envelope.id,
                attempt=attempt,
            )
            if attempt > job.retries:
                self._dead(message, raw_headers, attempt, error)
            else:
                self._retry(job, envelope.id, message, raw_headers, attempt + 1, error)
                self._event(
                    ev.JOB_RETRIED,
                    job=job.name,
                    id=envelope.id,
                    attempt=attempt + 1,
                    delay=job.delay_before(attempt + 1),
                    error=error,
                )
        else:
            self._event(
                ev.JOB_PERFORMED,
                job=job.name,
                id=envelope.id,
                attempt=attempt,
                duration=time.perf_counter() - started,
            )
        finally:
            _current.reset(token)

    def _call(self, job: Job[Any, Any], args: list[Any], kwargs: dict[str, Any]) -> None:
        if job.timeout is None:
            run_hook(job.function(*args, **kwargs))
        elif job.is_async:
            run_hook(asyncio.wait_for(job.function(*args, **kwargs), job.timeout))
        else:
            with _watchdog.guard(job.timeout):
                job.function(*args, **kwargs)

    def _retry(
        self,
        job: Job[Any, Any],
        job_id: str,
        message: Message,
        raw_headers: Any,
        attempt: int,
        error: BaseException,
    ) -> None:
        # Named by the job and the attempt it schedules: the same attempt failing again (its
        # message read twice) schedules the same retry, which replaces the first if not sent.
        schedule_id = (
            f"job-{job_id}-{attempt}"
            if job_id
            else f"job-{message.topic}-{message.partition}-{message.offset}"
        )
        self._settle(
            message,
            time.time() + job.delay_before(attempt),
            self.queue.topic,
            retry_headers(raw_headers, attempt, error),
            schedule_id,
        )

    def _dead(
        self, message: Message, raw_headers: Any, attempts: int | None, error: BaseException
    ) -> None:
        _log.error(
            "job at %s/%s@%s is dead after %s attempt(s): %r",
            message.topic,
            message.partition,
            message.offset,
            attempts or "?",
            error,
        )
        job_id = header(raw_headers, ID)
        schedule_id = (
            f"job-{job_id}-dead-{attempts}"
            if job_id and attempts
            else f"job-{message.topic}-{message.partition}-{message.offset}-dead"
        )
        self._settle(
            message,
            time.time(),
            self.queue.dead_topic,
            dead_headers(raw_headers, self.queue.name, attempts, error),
            schedule_id,
        )
        self._event(
            ev.JOB_DIED, job=header(raw_headers, NAME), id=job_id, attempts=attempts, error=error
        )

    def _settle(
        self,
        message: Message,
        at: float,
        topic: str,
        headers: list[tuple[str, Any]],
        schedule_id: str,
    ) -> None:
        """Store a failed job's retry (or its death: sent to the dead-job topic now) as a
        scheduled message ``schedule_id`` and move past its message, as one step: in one
        transaction of the app's transactional producer with the message's offset, so that a
        crash replays neither or both (a replayed attempt would run and be retried again, or
        die twice). Through the schedules topic, so that the queue's and the dead-job topic
        hold no transaction markers (their watermarks count their jobs). In lanes, where
        other lanes' jobs before it may still run, the offset cannot go with it: the record
        first, then the mark."""
        message_at: dict[str, Any] = {
            "topic": topic,
            "payload": message.raw_payload,
            "key": message.raw_key,
            "headers": headers,
            "id": schedule_id,
            "schedules_topic": self.queue.jobs.app.schedules.topic,
        }
        when = datetime.fromtimestamp(at, tz=UTC)
        executor = self._executor
        if executor.in_lane:
            self.producer.produce_at(when, **message_at)
        else:
            producer = executor.transactional_producer()
            metadata = executor.offset_metadata
            with producer.transaction() as transactions:
                producer.produce_at(when, **message_at)
                transactions.send_offsets(
                    [(message.topic, message.partition, message.offset + 1)],
                    executor.group_metadata(),
                    metadata=None
                    if metadata is None
                    else {(message.topic, message.partition): metadata},
                )
        self.mark_as_consumed(message)

    def _event(self, name: str, **fields: Any) -> None:
        monitor = self.app.monitor
        if name in monitor.subscribed:
            monitor.instrument(name, topic=self.topic, partition=self.partition, **fields)
