"""A connect worker: one of the processes of a connect cluster (the workers sharing one
``group``). It reads the connectors' configurations from the config topic, holds the slots
the group gave it (:mod:`~conveyor.connect.runtime.membership`), runs the tasks in them and
writes their statuses to the status topic. Any worker answers any REST call: a change is a
record of the config topic that every worker reads, so no request is forwarded.

The worker acts on a thread of its own (:meth:`_reconcile`): woken by a configuration read,
a change of slots, a task's crash or a restart asked for, it compares the tasks it should run
with the ones it runs, stops what should not run and starts what should."""

from __future__ import annotations

import logging
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from conveyor.connect.runtime.cluster import Restart, keys
from conveyor.connect.runtime.connect_cluster import ConnectCluster, WorkerSettings
from conveyor.connect.runtime.membership import Membership, slot_of
from conveyor.connect.runtime.plugins import (
    Connector,
    Plugins,
    SinkConnector,
    SourceConnector,
    class_path,
)
from conveyor.connect.runtime.sources import SourceRunner, ensure_offsets_topic
from conveyor.connect.runtime.tasks import MakeApp, RunningTask, start_sink_task
from conveyor.errors import ConfigurationError

__all__ = ["Worker", "WorkerSettings"]

_log = logging.getLogger("conveyor.connect")


@dataclass
class _Wanted:
    plugin: Connector
    config: dict[str, Any]


class Worker:
    """One connect worker (see the module). ``make_app`` makes the app a sink task runs in
    (``conveyor.App``); :attr:`cluster` answers the REST API."""

    def __init__(
        self, settings: WorkerSettings, make_app: MakeApp, plugins: Plugins | None = None
    ) -> None:
        self.settings = settings
        self._make_app = make_app
        self.cluster = ConnectCluster(settings, plugins, on_change=self._poke)
        self.configs = self.cluster.configs
        kafka, replicas = settings.kafka, settings.replication_factor
        self.membership = Membership(
            kafka,
            settings.group,
            settings.topic("slots"),
            settings.slots,
            self._poke,
            replication_factor=replicas,
            session_timeout=settings.session_timeout,
        )
        self._changed = threading.Condition()
        self._dirty = False
        self._stopping = False
        self._running: dict[tuple[str, int], RunningTask] = {}
        # task -> the configuration it failed with, until restarted or reconfigured
        self._failed: dict[tuple[str, int], dict[str, Any]] = {}
        self._reported: dict[str, Any] = {}  # status key -> what this worker wrote there
        self._report_keys: dict[str, tuple[str, int]] = {}  # status key -> its connector, slot
        self._thread: threading.Thread | None = None

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        """Read the cluster's topics, join its group and start acting on them."""
        settings = self.settings
        ensure_offsets_topic(settings.kafka, settings.topic("offsets"), settings.replication_factor)
        self.cluster.start()
        self.configs.take_restarts()  # asked before this worker was here: nothing of it runs
        self._thread = threading.Thread(target=self._reconcile, name="connect-worker", daemon=True)
        self._thread.start()
        self.membership.start()
        self._poke()

    def stop(self) -> None:
        """Leave the group, stop every task (their offsets committed), close the topics."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(120)
        self.membership.stop()
        for running in list(self._running.values()):
            running.stop()
        self._running.clear()
        self.cluster.stop()

    def _poke(self) -> None:
        with self._changed:
            self._dirty = True
            self._changed.notify_all()

    def _reconcile(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._dirty or self._stopping)
                if self._stopping:
                    return
                self._dirty = False
            try:
                self._act()
            except Exception:
                _log.exception("connect worker: acting on the cluster's state failed")

    def _act(self) -> None:
        held = self.membership.slots
        slots = self.membership.count
        wanted: dict[tuple[str, int], _Wanted] = {}
        names = self.configs.names()
        self._forget_reports(names, held, slots)
        for name in names:
            home = slot_of(name, 0, slots) in held
            target = self.configs.target(name)
            try:
                plugin, task_configs = self.cluster.tasks_of(name)
            except Exception as error:
                if home:
                    self._report_connector(name, "FAILED", trace=_trace(error))
                continue
            if home:
                self._report_connector(name, "RUNNING" if target == "STARTED" else target)
            for task, config in enumerate(task_configs):
                if slot_of(name, task, slots) in held:
                    if target == "STARTED":
                        wanted[(name, task)] = _Wanted(plugin, config)
                    elif (name, task) not in self._running:
                        self._report_task(name, task, target)
        self._restart(self.configs.take_restarts())
        for key, running in list(self._running.items()):
            trace = running.trace
            if trace is not None:
                self._stop_task(key, report=None)
                self._failed[key] = running.config
                self._report_task(*key, "FAILED", trace=trace)
            elif key not in wanted or wanted[key].config != running.config:
                stays = self.configs.config(key[0]) is not None and _held(key, held, slots)
                state = self.configs.target(key[0]) if stays and key not in wanted else None
                self._stop_task(key, report=state if state in ("PAUSED", "STOPPED") else None)
        for key, want in wanted.items():
            if self._failed.get(key, want.config) != want.config:
                del self._failed[key]  # reconfigured: tried again
            if key not in self._running and key not in self._failed:
                self._start_task(key, want)
        for key in [key for key in self._failed if key not in wanted]:
            del self._failed[key]

    def _forget_reports(self, names: list[str], held: frozenset[int], slots: int) -> None:
        """Statuses of connectors deleted, and of slots held no more, are written anew."""
        present = set(names)
        for key, (name, task) in list(self._report_keys.items()):
            if name not in present or not _held((name, task), held, slots):
                self._reported.pop(key, None)
                del self._report_keys[key]

    def _restart(self, restarts: list[Restart]) -> None:
        for restart in restarts:
            name = restart.name
            if restart.task is None and not restart.include_tasks:
                self._reported.pop(keys.connector_status(name), None)  # written again
                continue
            for key in [k for k in {*self._running, *self._failed} if k[0] == name]:
                if restart.task is not None and key[1] != restart.task:
                    continue
                if restart.only_failed and key not in self._failed:
                    continue
                self._report_task(*key, "RESTARTING")
                self._stop_task(key, report=None)
                self._failed.pop(key, None)

    def _start_task(self, key: tuple[str, int], want: _Wanted) -> None:
        name, task = key
        plugin = want.plugin
        try:
            if isinstance(plugin, SinkConnector):
                running = start_sink_task(
                    self._make_app, self.settings.kafka, plugin, name, task, want.config, self._poke
                )
            elif isinstance(plugin, SourceConnector):
                running = self._start_source(plugin, name, task, want.config)
            else:
                raise ConfigurationError(
                    f"{class_path(type(plugin))} is neither a sink nor a source connector",
                    "connector.class",
                )
        except Exception as error:
            trace = _trace(error)
            _log.error("connector %s task %d failed to start: %r", name, task, error)
            self._failed[key] = want.config
            self._report_task(name, task, "FAILED", trace=trace)
            return
        self._running[key] = running
        self._report_task(name, task, "RUNNING")

    def _start_source(
        self, plugin: SourceConnector, name: str, task: int, config: dict[str, Any]
    ) -> RunningTask:
        offsets = config["offsets.storage.topic"] or self.settings.topic("offsets")
        if config["offsets.storage.topic"]:
            ensure_offsets_topic(self.settings.kafka, offsets, self.settings.replication_factor)
        exactly_once = config["exactly.once.support"] != "none"
        replicas = config["topic.creation.default.replication.factor"]
        if replicas < 1:
            replicas = self.settings.replication_factor
        runner = SourceRunner(
            self.settings.kafka,
            plugin.task({**config, "task.id": task}),
            name,
            task,
            offsets,
            f"{self.settings.group}-{name}-{task}" if exactly_once else None,
            self._poke,
            new_topics=(config["topic.creation.default.partitions"], replicas),
        )
        runner.start()
        return RunningTask(name, task, config, runner)

    def _stop_task(self, key: tuple[str, int], report: str | None) -> None:
        running = self._running.pop(key, None)
        if running is not None:
            running.stop()
        self._failed.pop(key, None)
        if report is not None:
            self._report_task(*key, report)

    def _report_connector(self, name: str, state: str, trace: str | None = None) -> None:
        self._write_status(keys.connector_status(name), (name, 0), state, trace)

    def _report_task(self, name: str, task: int, state: str, trace: str | None = None) -> None:
        self._write_status(keys.task_status(name, task), (name, task), state, trace)

    def _write_status(
        self, key: str, owner: tuple[str, int], state: str, trace: str | None
    ) -> None:
        """Write a status unless this worker wrote the same one there last."""
        if self.configs.config(owner[0]) is None:
            return  # deleted meanwhile: its statuses were deleted with it
        status: dict[str, Any] = {"state": state, "worker_id": self.settings.worker_id}
        if trace is not None:
            status["trace"] = trace
        if self._reported.get(key) == status:
            return
        try:
            self.cluster.write_status(key, status)
        except Exception:
            _log.exception("connect worker: the status of %s could not be written", owner[0])
            return
        self._reported[key] = status
        self._report_keys[key] = owner


def _held(key: tuple[str, int], held: frozenset[int], slots: int) -> bool:
    return slot_of(key[0], key[1], slots) in held


def _trace(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
