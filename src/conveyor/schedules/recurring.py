"""Recurring tasks: ``app.recurring("*/5 * * * *", callable)`` runs the callable on that cron
schedule once per slot across all the processes of the app's consumer group.

Coordination is Kafka's: a one-partition compacted topic (``conveyor_recurring``) is read by
the group, and the process that owns its partition runs the tasks. For each slot it first
writes a record (key: the task's name, value: the slot's time) and then runs the task on a
thread of its own; a process that takes the partition over reads those records up to where
the partition ended when it got it, so a slot already started elsewhere is not run again.
A slot is run at most once (a process that dies while running one does not run it again);
slots missed while no process owned the partition are skipped, not caught up.

The same topic holds what the web UI shows and changes (:mod:`conveyor.schedules.records`):
the result of each task's last run, whether it is disabled (a disabled task's slots are
skipped, across restarts: the record stays) and requests to run one now (the process
running the tasks marks one taken before it runs it, so a request runs once).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from conveyor.consumer import Consumer
from conveyor.errors import ConfigurationError
from conveyor.instrumentation import events as ev
from conveyor.messages import records_of
from conveyor.schedules.cron import Cron
from conveyor.schedules.records import (
    SEPARATOR,
    TaskRecords,
    fold_record,
    handled_message,
    result_message,
)
from conveyor.schedules.wire import RECURRING_TOPIC

if TYPE_CHECKING:
    from conveyor.instrumentation import Event
    from conveyor.routing.host import RoutedHost

__all__ = ["DEFAULT_TOPIC", "RecurringTasks"]

_log = logging.getLogger("conveyor.recurring")

DEFAULT_TOPIC = RECURRING_TOPIC
_RECORD_TIMEOUT = 5.0  # seconds a slot's record may take (a rebalance waits for it)
_IDLE = 60.0  # seconds the scheduler sleeps at most between looks


@dataclass
class _Task:
    name: str
    cron: Cron
    run: Callable[[], Any]
    next_at: float = 0.0


class RecurringTasks:
    """The recurring tasks of one app (made by the first ``app.recurring(...)``)."""

    def __init__(self, app: RoutedHost, topic: str = DEFAULT_TOPIC) -> None:
        self.app = app
        self.topic = topic
        self.tasks: dict[str, _Task] = {}
        self.last_runs: dict[str, float] = {}
        self.records: dict[str, TaskRecords] = {}
        """What the topic holds about each task, as far as this process read it."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._assigned = False
        self._check = False  # the partition was (re)assigned: find where it ends
        self._loaded_to = 0  # the next offset this process has read of the partition
        self._target: int | None = None  # where it ended at assignment (leader once read)
        self._leading = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        tasks = self

        class RecurringRecords(Consumer):
            """Reads the runs recorded on the recurring topic (built in: ``app.recurring``)."""

            def consume(self) -> None:
                tasks._load(list(self.messages))

        # Never committed: every owner reads the records from the start (a compacted topic).
        app.routes.topic(
            topic,
            RecurringRecords,
            partitions=1,
            config={"cleanup.policy": "compact"},
            initial_offset="earliest",
            manual_offset_management=True,
        )
        app.monitor.subscribe(ev.REBALANCE_PARTITIONS_ASSIGNED, self._on_assigned)
        app.monitor.subscribe(ev.REBALANCE_PARTITIONS_REVOKED, self._on_revoked)
        app.monitor.subscribe(ev.APP_RUNNING, lambda _event: self._start())
        app.add_closing_hook(self._stop)

    def add(self, cron: str, run: Callable[[], Any], name: str | None = None) -> None:
        """Register a task (see ``App.recurring``)."""
        parsed = Cron.parse(cron)
        if not callable(run):
            raise ConfigurationError(f"a recurring task must be callable, got {run!r}", "task")
        task_name = name or getattr(run, "__qualname__", None) or repr(run)
        if not isinstance(task_name, str) or not task_name or SEPARATOR in task_name:
            raise ConfigurationError(
                f"a recurring task's name is text without \\x1f, got {task_name!r}", "name"
            )
        if task_name in self.tasks:
            raise ConfigurationError(
                f"a recurring task named {task_name!r} exists: give name=...", "name"
            )
        with self._changed:
            self.tasks[task_name] = _Task(task_name, parsed, run)
            self._changed.notify_all()

    def enabled(self, name: str) -> bool:
        """Whether task ``name`` runs on its schedule (not disabled from the web UI)."""
        with self._lock:
            found = self.records.get(name)
            return found is None or found.enabled

    @property
    def leading(self) -> bool:
        """Whether this process runs the tasks now."""
        return self._leading

    # -- the partition (listener and worker threads) ------------------------------------------

    def _on_assigned(self, event: Event) -> None:
        if (self.topic, 0) in event["partitions"]:
            with self._changed:
                self._assigned, self._check, self._target = True, True, None
                self._loaded_to = 0  # read again from the start
                self._changed.notify_all()

    def _on_revoked(self, event: Event) -> None:
        if (self.topic, 0) in event["partitions"]:
            with self._changed:  # waits for a slot being recorded: none is recorded after
                self._assigned = self._leading = False
                self._target = None
                self._changed.notify_all()

    def _load(self, batch: list[Any]) -> None:
        with self._changed:
            for raw in records_of(batch):
                self._loaded_to = raw.offset() + 1
                folded = fold_record(self.records, raw.key(), raw.value())
                if folded is not None and folded[1] is None:
                    name = folded[0]
                    at = self.records[name].last_slot or 0.0
                    self.last_runs[name] = max(at, self.last_runs.get(name, 0.0))
            self._changed.notify_all()

    # -- running (a thread of its own) ---------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="conveyor-recurring", daemon=True
            )
            self._thread.start()

    def _stop(self) -> None:
        self._stopped.set()
        with self._changed:
            self._leading = False
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self._step()
            except Exception:  # never let the scheduler die: log and go on after a pause
                _log.exception("recurring tasks: the scheduler failed; going on in 1 s")
                self._stopped.wait(1.0)

    def _step(self) -> None:
        """One round: learn where the partition ends, take the lead, run what is due."""
        with self._changed:
            check = self._assigned and self._check
            self._check = False
        if check:  # outside the lock: a call to the broker
            try:
                high = self.app.admin.read_watermark_offsets(self.topic, 0)[1]
            except Exception as error:
                _log.warning("recurring tasks: cannot read %s's end (%r)", self.topic, error)
                with self._changed:
                    self._check = self._assigned
                self._stopped.wait(1.0)
                return
            with self._changed:
                if self._assigned:
                    self._target = high
        with self._changed:
            target = self._target
            if (
                not self._leading
                and self._assigned
                and target is not None
                and (self._loaded_to >= target)
            ):
                self._leading = True
                now = time.time()
                for task in self.tasks.values():
                    task.next_at = self._next(task, now)
                _log.info("recurring tasks: this process runs them now")
            if not self._leading:
                self._changed.wait(timeout=0.5 if self._assigned else _IDLE)
                return
            due, wait = self._due(time.time())
            requested = self._requested()
            if not due and not requested:
                self._changed.wait(timeout=_IDLE if wait is None else min(wait, _IDLE))
                return
            recorded = []
            for task, slot in due:  # recorded under the lock: a revocation waits for it
                if self._record(task, slot):
                    recorded.append((task, slot, False))
            for task, request in requested:  # taken before it runs: a restart does not rerun it
                if self._take(task, request):
                    recorded.append((task, time.time(), True))
            if not recorded:  # every record failed (refused, producer closed): not a busy loop
                self._changed.wait(timeout=min(wait, 1.0) if wait is not None else 1.0)
        for task, slot, manual in recorded:
            threading.Thread(
                target=self._run,
                args=(task, slot, manual),
                name=f"conveyor-recurring-{task.name}",
                daemon=True,
            ).start()

    def _next(self, task: _Task, after: float) -> float:
        last = self.last_runs.get(task.name, 0.0)
        moment = task.cron.next_after(datetime.fromtimestamp(max(after - 1, last), UTC))
        return moment.timestamp() if moment is not None else float("inf")

    def _due(self, now: float) -> tuple[list[tuple[_Task, float]], float | None]:
        due = []
        soonest: float | None = None
        for task in self.tasks.values():
            if task.next_at == 0.0:
                task.next_at = self._next(task, now)
            if task.next_at <= now:
                records = self.records.get(task.name)
                disabled = records is not None and not records.enabled
                if task.next_at > self.last_runs.get(task.name, 0.0) and not disabled:
                    due.append((task, task.next_at))
                task.next_at = self._next(task, max(now, task.next_at) + 0.001)
            wait = task.next_at - now
            soonest = wait if soonest is None else min(soonest, wait)
        return due, soonest

    def _requested(self) -> list[tuple[_Task, str]]:
        """The requests to run a task now that no process took yet (of known tasks)."""
        return [
            (self.tasks[name], records.requested)
            for name, records in self.records.items()
            if records.requested is not None and name in self.tasks
        ]

    def _take(self, task: _Task, request: str) -> bool:
        """Mark a request to run ``task`` now taken, before running it; False when the broker
        did not take the mark (the request stays, tried again at the next look)."""
        try:
            self.app.producer.produce_sync(
                **handled_message(self.topic, task.name, request), timeout=_RECORD_TIMEOUT
            )
        except Exception as error:
            _log.error("recurring task %s: could not take a run request (%r)", task.name, error)
            return False
        records = self.records[task.name]
        if records.requested == request:
            records.requested = records.requested_by = None
        return True

    def _record(self, task: _Task, slot: float) -> bool:
        """Write the slot before running it; False (the slot is skipped, logged) when the
        broker did not take it in time."""
        try:
            self.app.producer.produce_sync(
                topic=self.topic,
                partition=0,
                key=task.name,
                payload=json.dumps({"at": slot}).encode(),
                timeout=_RECORD_TIMEOUT,
            )
        except Exception as error:
            _log.error(
                "recurring task %s: slot %s skipped, not recorded (%r)", task.name, slot, error
            )
            if ev.ERROR_OCCURRED in self.app.monitor.subscribed:
                self.app.monitor.instrument(
                    ev.ERROR_OCCURRED, type="recurring.record.error", error=error, task=task.name
                )
            return False
        self.last_runs[task.name] = slot
        return True

    def _run(self, task: _Task, slot: float, manual: bool = False) -> None:
        started = time.time()
        try:
            task.run()
        except Exception as error:
            _log.exception("recurring task %s (slot %s) failed", task.name, slot)
            self._result(task, slot, started, error, manual)
            if ev.ERROR_OCCURRED in self.app.monitor.subscribed:
                self.app.monitor.instrument(
                    ev.ERROR_OCCURRED, type="recurring.task.error", error=error, task=task.name
                )
            return
        self._result(task, slot, started, None, manual)
        if ev.RECURRING_RAN in self.app.monitor.subscribed:
            self.app.monitor.instrument(
                ev.RECURRING_RAN,
                task=task.name,
                slot=slot,
                late=started - slot,
                duration=time.time() - started,
            )

    def _result(
        self, task: _Task, slot: float, started: float, error: BaseException | None, manual: bool
    ) -> None:
        """Record how a run ended (for the web UI); a failure to record is logged only."""
        message = result_message(
            self.topic,
            task.name,
            slot=slot,
            started=started,
            duration=time.time() - started,
            error=error,
            manual=manual,
        )
        try:
            self.app.producer.produce_async(**message)
        except Exception as failure:
            _log.warning("recurring task %s: its result was not recorded (%r)", task.name, failure)
