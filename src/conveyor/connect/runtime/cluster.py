"""What the workers share, as read from their topics: each connector's configuration and
target state and the restarts asked for (the config topic), each connector's and task's
status (the status topic). Keys and values as Kafka Connect writes them, so one reads
like the other."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["TARGETS", "Configs", "Restart", "Statuses", "keys"]

TARGETS = ("STARTED", "PAUSED", "STOPPED")
"""The states a connector can be asked to be in."""


class keys:
    """The record keys of the workers' topics."""

    @staticmethod
    def connector(name: str) -> str:
        return f"connector-{name}"

    @staticmethod
    def target(name: str) -> str:
        return f"target-state-{name}"

    @staticmethod
    def restart_connector(name: str) -> str:
        return f"restart-connector-{name}"

    @staticmethod
    def restart_task(name: str, task: int) -> str:
        return f"restart-task-{name}-{task}"

    @staticmethod
    def connector_status(name: str) -> str:
        return f"status-connector-{name}"

    @staticmethod
    def task_status(name: str, task: int) -> str:
        return f"status-task-{name}-{task}"


@dataclass(frozen=True)
class Restart:
    """A restart asked for: of connector ``name`` (``task``: of that task only), with its
    tasks or not, of the failed ones only or all."""

    name: str
    task: int | None = None
    include_tasks: bool = False
    only_failed: bool = False


def _name_and_task(rest: str) -> tuple[str, int] | None:
    name, _, task = rest.rpartition("-")
    return (name, int(task)) if name and task.isdigit() else None


class Configs:
    """The config topic as read so far (thread-safe: written by its log's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, dict[str, str]] = {}
        self._targets: dict[str, str] = {}
        self._restarts: list[Restart] = []

    def apply(self, key: str, value: Any) -> None:
        """One record of the config topic."""
        with self._lock:
            if key.startswith("connector-"):
                name = key.removeprefix("connector-")
                if value is None:
                    self._connectors.pop(name, None)
                    self._targets.pop(name, None)
                else:
                    self._connectors[name] = {k: str(v) for k, v in value["properties"].items()}
            elif key.startswith("target-state-"):
                name = key.removeprefix("target-state-")
                if value is None:
                    self._targets.pop(name, None)
                elif value.get("state") in TARGETS:
                    self._targets[name] = value["state"]
            elif key.startswith("restart-connector-") and value is not None:
                self._restarts.append(
                    Restart(
                        key.removeprefix("restart-connector-"),
                        include_tasks=bool(value.get("include-tasks")),
                        only_failed=bool(value.get("only-failed")),
                    )
                )
            elif key.startswith("restart-task-") and value is not None:
                found = _name_and_task(key.removeprefix("restart-task-"))
                if found is not None:
                    self._restarts.append(Restart(found[0], task=found[1]))

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def config(self, name: str) -> dict[str, str] | None:
        with self._lock:
            found = self._connectors.get(name)
            return None if found is None else dict(found)

    def target(self, name: str) -> str:
        with self._lock:
            return self._targets.get(name, "STARTED")

    def take_restarts(self) -> list[Restart]:
        """The restarts asked for since the last call."""
        with self._lock:
            taken, self._restarts = self._restarts, []
            return taken


class Statuses:
    """The status topic as read so far: ``{"state", "worker_id", "trace"?}`` per connector
    and per task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, dict[str, Any]] = {}
        self._tasks: dict[str, dict[int, dict[str, Any]]] = {}

    def apply(self, key: str, value: Any) -> None:
        """One record of the status topic."""
        with self._lock:
            if key.startswith("status-connector-"):
                name = key.removeprefix("status-connector-")
                if value is None:
                    self._connectors.pop(name, None)
                else:
                    self._connectors[name] = dict(value)
            elif key.startswith("status-task-"):
                found = _name_and_task(key.removeprefix("status-task-"))
                if found is None:
                    return
                name, task = found
                if value is None:
                    self._tasks.get(name, {}).pop(task, None)
                else:
                    self._tasks.setdefault(name, {})[task] = dict(value)

    def connector(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._connectors.get(name)
            return None if found is None else dict(found)

    def tasks(self, name: str) -> dict[int, dict[str, Any]]:
        with self._lock:
            return {task: dict(status) for task, status in self._tasks.get(name, {}).items()}
