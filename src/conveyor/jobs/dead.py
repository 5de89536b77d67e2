"""Dead jobs: what a queue's dead-job topic holds, read as a person looks at it, and the job
message that sends one back to its queue (its attempts counted from 1 again)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.iterator.scan import Start, TopicReader
from conveyor.jobs.wire import (
    ATTEMPT,
    DEAD_BACKTRACE,
    DEAD_CLASS,
    DEAD_MESSAGE,
    DEAD_QUEUE,
    ERROR,
    NAME,
    decode,
    header,
)

__all__ = ["DeadJob", "discard", "discarded", "read_dead_job", "revived", "reviver"]

if TYPE_CHECKING:
    from conveyor.jobs.queues import Queue
    from conveyor.producer import Producer

_DEAD = (ATTEMPT, ERROR, DEAD_CLASS, DEAD_MESSAGE, DEAD_BACKTRACE, DEAD_QUEUE)


@dataclass(frozen=True)
class DeadJob:
    """One dead job: where it is (``partition``, ``offset``: its ``ref``), which job with which
    arguments, its id, how many attempts it had and its last error."""

    partition: int
    offset: int
    job: str
    id: str
    args: list[Any]
    kwargs: dict[str, Any]
    attempts: int | None
    error_class: str
    error_message: str
    timestamp: float | None

    @property
    def ref(self) -> str:
        return f"{self.partition}:{self.offset}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "partition": self.partition,
            "offset": self.offset,
            "job": self.job,
            "id": self.id,
            "args": self.args,
            "kwargs": self.kwargs,
            "attempts": self.attempts,
            "error_class": self.error_class,
            "error_message": self.error_message,
            "timestamp": self.timestamp,
        }


def read_dead_job(raw: Any) -> DeadJob:
    """librdkafka's message from a dead-job topic as a :class:`DeadJob` (a message that is no
    job's envelope is shown with what its headers say)."""
    headers = raw.headers() or []
    try:
        envelope = decode(raw.value())
        name, job_id, args, kwargs = envelope.name, envelope.id, envelope.args, envelope.kwargs
    except ValueError:
        name, job_id, args, kwargs = header(headers, NAME) or "?", "", [], {}
    attempts = header(headers, ATTEMPT)
    kind, stamp = raw.timestamp()
    return DeadJob(
        raw.partition(),
        raw.offset(),
        name,
        job_id,
        args,
        kwargs,
        int(attempts) if attempts and attempts.isdigit() else None,
        header(headers, DEAD_CLASS) or "",
        header(headers, DEAD_MESSAGE) or "",
        stamp / 1000 if kind and stamp >= 0 else None,
    )


def revived(raw: Any, dead_topic: str, to: str | None) -> dict[str, Any]:
    """A dead job as the message that runs it again on ``to`` (its queue's topic): its
    payload, key and headers, the dead job's own headers dropped and its attempt 1."""
    assert to is not None, "a dead job goes back to its queue's topic"
    del dead_topic
    kept = [(name, value) for name, value in raw.headers() or [] if name not in _DEAD]
    return {
        "topic": to,
        "payload": raw.value(),
        "key": raw.key(),
        "headers": [*kept, (ATTEMPT, "1")],
    }


def reviver(skip: set[tuple[int, int]]) -> Callable[[Any, str, str | None], dict[str, Any] | None]:
    """:func:`revived`, but ``None`` (not sent) for the dead jobs at ``skip`` (discarded)."""

    def revive(raw: Any, dead_topic: str, to: str | None) -> dict[str, Any] | None:
        if (raw.partition(), raw.offset()) in skip:
            return None
        return revived(raw, dead_topic, to)

    return revive


def discard(producer: Producer, queue: Queue, selection: Iterable[tuple[int, int]]) -> int:
    """Note the dead jobs at ``selection`` as discarded: no longer listed, never sent back.
    Returns how many were noted (once the broker has them)."""
    stamp = str(time.time())
    messages = [
        {"topic": queue.dismissed_topic, "key": f"{partition}:{offset}", "payload": stamp}
        for partition, offset in selection
    ]
    if messages:
        producer.produce_many_sync(messages)
    return len(messages)


def discarded(kafka: Mapping[str, Any], queue: Queue, limit: int = 100_000) -> set[tuple[int, int]]:
    """The refs of the queue's discarded dead jobs (the whole compacted topic, read from its
    start; nothing when it does not exist yet)."""
    reader = TopicReader(kafka, "conveyor-jobs-discarded")
    try:
        raws, _ = reader.scan(queue.dismissed_topic, Start("offset", 0), limit)
    except ConfigurationError:  # not created yet: nothing discarded
        return set()
    refs = set()
    for raw in raws:
        key = (raw.key() or b"").decode("ascii", "replace")
        partition, _, offset = key.partition(":")
        if raw.value() is not None and partition.isdigit() and offset.isdigit():
            refs.add((int(partition), int(offset)))
    return refs
