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
    "ATTEMPT", "ERROR", "ID", "NAME", "Envelope", "dead_headers", "decode", "encode",
    "header", "retry_headers",
]  # fmt: skip

NAME, ID, ATTEMPT, ERROR = (
    "conveyor-job",
    "conveyor-job-id",
    "conveyor-job-attempt",
    "conveyor-job-error",
)
DEAD_CLASS, DEAD_MESSAGE, DEAD_BACKTRACE, DEAD_QUEUE = (
    "conveyor-job-error-class", "conveyor-job-error-message", "conveyor-job-error-backtrace",
    "conveyor-job-queue",
)  # fmt: skip


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
    body = {"job": name, "args": envelope.args, "kwargs": envelope.kwargs, "id": envelope.id,
            "enqueued_at": envelope.enqueued_at}  # fmt: skip
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
    return Envelope(
        body["job"], args, kwargs, str(body.get("id", "")), int(body.get("enqueued_at", 0))
    )


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
    headers: list[tuple[str, bytes]] | None, queue: str, attempts: int, error: BaseException
) -> list[tuple[str, Any]]:
    """The headers of a dead job: its attempts and its last error, class, message, backtrace."""
    kept = _without(headers, ATTEMPT, ERROR, DEAD_CLASS, DEAD_MESSAGE, DEAD_BACKTRACE, DEAD_QUEUE)
    return [
        *kept, (ATTEMPT, str(attempts)), (DEAD_QUEUE, queue),
        (DEAD_CLASS, type(error).__qualname__), (DEAD_MESSAGE, str(error)[:8000]),
        (DEAD_BACKTRACE, "".join(traceback.format_exception(error))[-8000:]),
    ]  # fmt: skip
