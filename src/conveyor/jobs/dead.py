"""Dead jobs: what a queue's dead-job topic holds, read as a person looks at it, and the job
message that sends one back to its queue (its attempts counted from 1 again)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

__all__ = ["DeadJob", "read_dead_job", "revived"]

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
        return {"ref": self.ref, "partition": self.partition, "offset": self.offset,
                "job": self.job, "id": self.id, "args": self.args, "kwargs": self.kwargs,
                "attempts": self.attempts, "error_class": self.error_class,
                "error_message": self.error_message, "timestamp": self.timestamp}  # fmt: skip


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
        raw.partition(), raw.offset(), name, job_id, args, kwargs,
        int(attempts) if attempts and attempts.isdigit() else None,
        header(headers, DEAD_CLASS) or "", header(headers, DEAD_MESSAGE) or "",
        stamp / 1000 if kind and stamp >= 0 else None,
    )  # fmt: skip


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
