"""What the Schedules page shows and does, as plain data: the pending scheduled messages (by
destination topic and due time) and the recurring tasks (schedule, next and last run, its
result); cancelling one schedule, and running, disabling or enabling a task. Nothing here
knows HTTP."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.schedules.host import SchedulesHost
from conveyor.schedules.records import TaskRecords, run_message, state_message
from conveyor.schedules.wire import DEFAULT_TOPIC, cancel_message
from conveyor.web.reading.schedules import ScheduledMessage, ScheduleReader
from conveyor.web.ui.views import NotFound, Page, paginate

if TYPE_CHECKING:
    from conveyor.routing.host import RoutedHost
    from conveyor.schedules.recurring import RecurringTasks

__all__ = ["TASK_ACTIONS", "ScheduleViews"]

TASK_ACTIONS = ("run", "disable", "enable")
"""What the page does to a recurring task (each one an action of the access rules)."""


class ScheduleViews:
    """The Schedules page of one app's web UI, and its actions."""

    def __init__(
        self,
        app: RoutedHost,
        reader: ScheduleReader | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.reader = reader or ScheduleReader(app.settings.kafka)
        self.clock = clock

    # -- where things are ------------------------------------------------------------------------

    @property
    def topic(self) -> str:
        """The schedules topic (the app's, else Conveyor's default)."""
        return self.app.schedules.topic if isinstance(self.app, SchedulesHost) else DEFAULT_TOPIC

    @property
    def tasks(self) -> RecurringTasks | None:
        return self.app.recurring_tasks if isinstance(self.app, SchedulesHost) else None

    def _group(self) -> str | None:
        """The consumer group of the app's dispatchers (``None``: the app does not run one)."""
        topic = self.topic
        return next((r.consumer_group for r in self.app.routes if r.name == topic), None)

    # -- the page -----------------------------------------------------------------------------

    def page(self, topic: str | None = None, page: int = 1) -> Page:
        """The pending scheduled messages (``topic``: only those for that destination; 50 a
        page, due first) with a count per destination, and the recurring tasks."""
        read = self.reader.pending(self.topic, self._group())
        now = self.clock()
        by_topic = Counter(m.topic for m in read.messages)
        chosen = [m for m in read.messages if topic in (None, "", m.topic)]
        rows, paging = paginate([self._row(m, now) for m in chosen], page)
        tasks, problem = self._tasks(now)
        return Page(
            "Schedules",
            {
                "schedules_topic": self.topic,
                "dispatching": self._group() is not None,
                "missing": read.missing,
                "complete": read.complete,
                "scanned": read.scanned,
                "total": len(read.messages),
                "topic": topic or "",
                "overdue": sum(1 for m in read.messages if m.at <= now),
                "by_topic": [
                    {
                        "topic": name,
                        "pending": count,
                        "next_at": min(m.at for m in read.messages if m.topic == name),
                    }
                    for name, count in sorted(by_topic.items())
                ],
                "pending": rows,
                "paging": paging,
                "recurring_topic": self.tasks.topic if self.tasks is not None else None,
                "tasks": tasks,
                "tasks_problem": problem,
            },
        )

    @staticmethod
    def _row(message: ScheduledMessage, now: float) -> dict[str, Any]:
        return {**message.to_dict(), "due_in": message.at - now}

    def _tasks(self, now: float) -> tuple[list[dict[str, Any]], str | None]:
        tasks = self.tasks
        if tasks is None:
            return [], None
        records, read = self.reader.recurring(tasks.topic)
        problem = None
        if read.missing:
            problem = f"the topic {tasks.topic} does not exist yet: no task ran"
        elif not read.complete:
            problem = f"read {read.scanned} records of {tasks.topic}, not all of them"
        rows = []
        for name, task in sorted(tasks.tasks.items()):
            found = records.get(name, TaskRecords())
            upcoming = task.cron.next_after(datetime.fromtimestamp(now, UTC))
            rows.append(
                {
                    "name": name,
                    "cron": task.cron.text,
                    "enabled": found.enabled,
                    "next_at": upcoming.timestamp()
                    if upcoming is not None and found.enabled
                    else None,
                    "last_at": found.last_slot,
                    "result": found.result,
                    "changed_by": found.changed_by,
                    "changed_at": found.changed_at,
                    "run_requested": found.requested is not None,
                    "requested_by": found.requested_by,
                }
            )
        return rows, problem

    # -- the actions --------------------------------------------------------------------------

    def find(self, schedule_id: str) -> ScheduledMessage:
        """The pending schedule ``schedule_id``.

        Raises:
            NotFound: none is pending under that id (sent, cancelled, or never made).
        """
        read = self.reader.pending(self.topic, self._group())
        found = next((m for m in read.messages if m.id == schedule_id), None)
        if found is None:
            raise NotFound("pending scheduled message", schedule_id)
        return found

    def cancel(self, schedule_id: str) -> dict[str, Any]:
        """Cancel a pending schedule: the tombstone ``cancel_scheduled`` writes, into the
        partition that holds the schedule (whatever partitioner made it).

        Raises:
            NotFound: no schedule of that id is pending.
        """
        found = self.find(schedule_id)
        self.app.producer.produce_sync(
            **cancel_message(schedule_id, self.topic),
            partition=found.stored_partition,
            timeout=30,
        )
        return {"cancelled": schedule_id, "topic": found.topic, "at": found.at}

    def task(self, action: str, name: str, by: str) -> dict[str, Any]:
        """Run task ``name`` now (whichever process runs the tasks takes the request, once),
        or disable or enable it (a record on the tasks' topic: it stays after a restart).

        Raises:
            ConfigurationError: an unknown action.
            NotFound: the app has no task of that name.
        """
        if action not in TASK_ACTIONS:
            raise ConfigurationError(
                f"unknown task action {action!r}; actions: {', '.join(TASK_ACTIONS)}", "action"
            )
        tasks = self.tasks
        if tasks is None or name not in tasks.tasks:
            raise NotFound("recurring task", name)
        result: dict[str, Any] = {"task": name, "action": action}
        if action == "run":
            request, message = run_message(tasks.topic, name, by=by)
            result["request"] = request
        else:
            message = state_message(tasks.topic, name, enabled=action == "enable", by=by)
        self.app.producer.produce_sync(**message, timeout=30)
        return result
