"""How a job travels: a JSON envelope (its name, arguments, id, when it was enqueued) and
``conveyor-job-*`` headers (the attempt, the last error), on its queue's topic; a dead job
keeps both and adds why it died."""

from __future__ import annotations

import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

from conveyor.serialization import json_dumps, json_loads

__all__ = [
    "ATTEMPT",
    "ERROR",
    "ID",
    "NAME",
    "Envelope",
    "attempt_of",
    "dead_headers",
    "decode",
    "encode",
    "header",
    "retry_headers",
]

NAME, ID, ATTEMPT, ERROR = (
    "conveyor-job",
    "conveyor-job-id",
    "conveyor-job-attempt",
    "conveyor-job-error",
)
DEAD_CLASS, DEAD_MESSAGE, DEAD_BACKTRACE, DEAD_QUEUE = (
    "conveyor-job-error-class",
    "conveyor-job-error-message",
    "conveyor-job-error-backtrace",
    "conveyor-job-queue",
)


@dataclass(frozen=True)
class Envelope:
    """One enqueued job: ``name`` (the job's), its arguments, its ``id`` (the same across its
    retries: an idempotency key the job can read) and ``enqueued_at`` (epoch ms)."""

    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    id: str
    enqueued_at: int


def encode(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Envelope, bytes]:
    """A new job's envelope and its JSON (model instances in the arguments as JSON too)."""
    envelope = Envelope(name, list(args), dict(kwargs), uuid.uuid4().hex, int(time.time() * 1000))
    body = {
        "job": name,
        "args": envelope.args,
        "kwargs": envelope.kwargs,
        "id": envelope.id,
        "enqueued_at": envelope.enqueued_at,
    }
    return envelope, json_dumps(body)


def decode(raw: bytes | None) -> Envelope:
    """The envelope of a job message.

    Raises:
        ValueError: not a job's envelope.
    """
    body = json_loads(raw or b"")
    if not isinstance(body, dict) or not isinstance(body.get("job"), str):
        raise ValueError("not a job: a JSON object with a job name was expected")
    args, kwargs = body.get("args", []), body.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ValueError("a job's args must be a list and its kwargs an object")
    enqueued_at = body.get("enqueued_at", 0)
    if (
        isinstance(enqueued_at, bool)
        or not isinstance(enqueued_at, int | float)
        or not (0 <= enqueued_at < _LATEST)
    ):  # a message that would fail each time it is read must die, not be retried forever
        raise ValueError(f"a job's enqueued_at must be epoch milliseconds, got {enqueued_at!r}")
    return Envelope(body["job"], args, kwargs, str(body.get("id", "")), int(enqueued_at))


_LATEST = 253_402_300_800_000  # 10000-01-01 in epoch ms: past any datetime


def attempt_of(headers: list[tuple[str, bytes]] | None) -> int:
    """The attempt a job message is for (its ``conveyor-job-attempt`` header; 1 without one).

    Raises:
        ValueError: the header is malformed (not a whole number from 1).
    """
    text = header(headers, ATTEMPT)
    if text is None:
        return 1
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError(
            f"the {ATTEMPT} header is malformed: {text[:40]!r} (a whole number from 1 was expected)"
        )
    return int(text)


def header(headers: list[tuple[str, bytes]] | None, name: str) -> str | None:
    """The last value of header ``name``, as text."""
    found = None
    for key, value in headers or ():
        if key == name and value is not None:
            found = value.decode("utf-8", "replace")
    return found


def _without(headers: list[tuple[str, bytes]] | None, *names: str) -> list[tuple[str, Any]]:
    return [(key, value) for key, value in headers or () if key not in names]


def retry_headers(
    headers: list[tuple[str, bytes]] | None, attempt: int, error: BaseException
) -> list[tuple[str, Any]]:
    """The headers of a job sent again for its ``attempt``: the last error said."""
    kept = _without(headers, ATTEMPT, ERROR)
    return [*kept, (ATTEMPT, str(attempt)), (ERROR, f"{type(error).__name__}: {error}"[:2000])]


def dead_headers(
    headers: list[tuple[str, bytes]] | None, queue: str, attempts: int | None, error: BaseException
) -> list[tuple[str, Any]]:
    """The headers of a dead job: its attempts (none when they are not known: a malformed
    attempt header) and its last error, class, message, backtrace."""
    kept = _without(headers, ATTEMPT, ERROR, DEAD_CLASS, DEAD_MESSAGE, DEAD_BACKTRACE, DEAD_QUEUE)
    counted = [] if attempts is None else [(ATTEMPT, str(attempts))]
    return [
        *kept,
        *counted,
        (DEAD_QUEUE, queue),
        (DEAD_CLASS, type(error).__qualname__),
        (DEAD_MESSAGE, str(error)[:8000]),
        (DEAD_BACKTRACE, "".join(traceback.format_exception(error))[-8000:]),
    ]
