"""The records of the recurring tasks' topic, and how they fold into each task's state.

Beside a task's slot (key: the task's name, value ``{"at": slot}``, written before the slot
runs), three more kinds of record live under keys of their own, the task's name and the
kind apart by ``\\x1f`` (so the compacted topic keeps the newest of each):

* ``result``: how the last run ended (``ok``, or the error), written after it;
* ``state``: ``{"enabled": false}`` while the task is disabled (the web UI's Disable);
* ``run``: a request to run the task now (the web UI's Run now), then the same key again
  once the process running the tasks took it (``handled``), so a restart does not run it
  twice.

The process that runs the tasks (:mod:`conveyor.schedules.recurring`) and the web UI both
read the topic with :func:`fold_record`: they cannot disagree on what it holds.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RESULT",
    "RUN",
    "SEPARATOR",
    "STATE",
    "TaskRecords",
    "fold_record",
    "handled_message",
    "record_key",
    "result_message",
    "run_message",
    "split_key",
    "state_message",
]

SEPARATOR = "\x1f"  # ASCII unit separator: refused in a task's name
RESULT, STATE, RUN = "result", "state", "run"
_KINDS = (RESULT, STATE, RUN)
_MAX_ERROR = 2000  # characters of an error message kept in a result


@dataclass
class TaskRecords:
    """What the topic holds about one task: its last slot (epoch seconds), whether it is
    enabled (and who changed that, when), the result of its last run, and a request to run
    it now that no process has taken yet (its id)."""

    last_slot: float | None = None
    enabled: bool = True
    changed_by: str | None = None
    changed_at: float | None = None
    result: dict[str, Any] | None = None
    requested: str | None = None
    requested_by: str | None = None


def record_key(name: str, kind: str | None = None) -> str:
    """The key of a task's record: its name for a slot, else ``name\\x1fkind``."""
    return name if kind is None else f"{name}{SEPARATOR}{kind}"


def split_key(key: str) -> tuple[str, str | None]:
    """A record key's task name and kind (``None``: a slot)."""
    name, separator, kind = key.rpartition(SEPARATOR)
    if separator and kind in _KINDS:
        return name, kind
    return key, None


def _message(topic: str, name: str, kind: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": 0,
        "key": record_key(name, kind),
        "payload": json.dumps(value).encode(),
    }


def state_message(topic: str, name: str, *, enabled: bool, by: str) -> dict[str, Any]:
    """The record that enables or disables task ``name`` (keyword arguments for
    ``produce_sync``)."""
    return _message(topic, name, STATE, {"enabled": enabled, "by": by, "at": time.time()})


def run_message(topic: str, name: str, *, by: str) -> tuple[str, dict[str, Any]]:
    """A request to run task ``name`` now: its id, and the record."""
    request = uuid.uuid4().hex
    return request, _message(topic, name, RUN, {"request": request, "by": by, "at": time.time()})


def handled_message(topic: str, name: str, request: str) -> dict[str, Any]:
    """The record saying request ``request`` was taken (it is not run again)."""
    return _message(topic, name, RUN, {"request": request, "handled": time.time()})


def result_message(
    topic: str,
    name: str,
    *,
    slot: float,
    started: float,
    duration: float,
    error: BaseException | None,
    manual: bool,
) -> dict[str, Any]:
    """The record of how a run ended (``error``: ``None`` when it returned)."""
    value: dict[str, Any] = {
        "slot": slot,
        "started": started,
        "duration": duration,
        "ok": error is None,
        "manual": manual,
    }
    if error is not None:
        value["error"] = f"{type(error).__name__}: {error}"[:_MAX_ERROR]
    return _message(topic, name, RESULT, value)


def fold_record(
    tasks: dict[str, TaskRecords], key: bytes | None, value: bytes | None
) -> tuple[str, str | None] | None:
    """Fold one record of the topic into ``tasks`` (by task name); returns its task's name
    and kind, or ``None`` for a record that is not one of these (skipped)."""
    try:
        name, kind = split_key((key or b"").decode("utf-8"))
        body = json.loads(value) if value is not None else None
    except (UnicodeDecodeError, ValueError):
        return None
    if not name or not isinstance(body, dict):
        return None
    task = tasks.setdefault(name, TaskRecords())
    try:
        if kind is None:
            at = float(body["at"])
            task.last_slot = at if task.last_slot is None else max(task.last_slot, at)
        elif kind == STATE:
            task.enabled = bool(body.get("enabled", True))
            task.changed_by, task.changed_at = body.get("by"), body.get("at")
        elif kind == RESULT:
            task.result = body
        elif "handled" in body:
            if task.requested == body.get("request"):
                task.requested = task.requested_by = None
        else:
            task.requested, task.requested_by = str(body["request"]), body.get("by")
    except (KeyError, TypeError, ValueError):
        return None
    return name, kind
