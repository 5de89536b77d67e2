"""What the Connectors page shows, as plain data: the connectors of a connect cluster
(``conveyor connect worker --group``), each one's state, worker and tasks with a failed
task's trace, read from the cluster's own topics as its workers read them; and the actions
the page offers (pause, resume, restart a connector or a task), written there as the REST
API writes them. Nothing here knows HTTP."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from conveyor.connect.runtime.connect_cluster import ConnectCluster, ConnectError, WorkerSettings
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.web.ui.views import NotFound, Page

__all__ = ["CONNECTOR_ACTIONS", "ConnectViews"]

CONNECTOR_ACTIONS = ("pause", "resume", "restart")
"""What the page can do to a connector (``restart`` with a task: that task only)."""


class ConnectViews:
    """The Connectors page of one web UI, over the connect cluster ``group``."""

    def __init__(self, kafka: Mapping[str, Any], group: str) -> None:
        self.group = group
        self._settings = WorkerSettings(kafka=dict(kafka), worker_id="web-ui", group=group)
        self._cluster: ConnectCluster | None = None
        self._lock = threading.Lock()

    def cluster(self) -> ConnectCluster:
        """The cluster's state, followed from the first call on.

        Raises:
            KafkaError: the cluster's topics are not there (no worker ever ran) or unreadable.
        """
        with self._lock:
            if self._cluster is None:
                cluster = ConnectCluster(self._settings)
                cluster.start(create=False)
                self._cluster = cluster
            return self._cluster

    def page(self) -> Page:
        try:
            cluster = self.cluster()
        except ConveyorError as error:
            return Page(
                "Connectors",
                {
                    "group": self.group,
                    "connectors": [],
                    "problem": f"No connect cluster {self.group} to show: {error}. Start one with "
                    f"conveyor connect worker --group {self.group}.",
                },
            )
        connectors = []
        for name in cluster.connector_names():
            try:
                status, info = cluster.status(name), cluster.info(name)
            except ConnectError:
                continue  # deleted meanwhile
            config = info["config"]
            connectors.append(
                {
                    "name": name,
                    "type": info["type"],
                    "class": config.get("connector.class", ""),
                    "target": cluster.configs.target(name),
                    "state": status["connector"]["state"],
                    "worker": status["connector"].get("worker_id", ""),
                    "trace": status["connector"].get("trace"),
                    "topics": config.get("topics") or config.get("topic") or "",
                    "tasks": status["tasks"],
                }
            )
        return Page("Connectors", {"group": self.group, "connectors": connectors, "problem": None})

    def act(self, name: str, action: str, task: int | None = None) -> dict[str, Any]:
        """Do ``action`` to connector ``name`` (or its task ``task``); what was done.

        Raises:
            NotFound: no such connector or task.
            ConfigurationError: an action the page does not offer.
        """
        if action not in CONNECTOR_ACTIONS:
            raise ConfigurationError(f"unknown connector action {action!r}", "action")
        cluster = self.cluster()
        try:
            if action == "restart" and task is not None:
                cluster.restart_task(name, task)
            elif action == "restart":
                cluster.restart(name, include_tasks=True)
            else:
                cluster.set_target(name, "PAUSED" if action == "pause" else "STARTED")
        except ConnectError as error:
            if error.status == 404:
                raise NotFound("connector", name) from None
            raise
        return {"connector": name, "action": action, "task": task}
