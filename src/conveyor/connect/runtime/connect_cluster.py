"""A connect cluster as its members and its web UI see it: the connectors' configurations
and target states (its configs topic), their statuses (its status topic), the plugins
installed, and every call of Kafka Connect's REST API, answered from what the topics hold and
done by writing to them. A :class:`~conveyor.connect.runtime.worker.Worker` runs the tasks
besides; the web UI reads and steers a cluster with one of these alone."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.connect.runtime.cluster import TARGETS, Configs, Statuses, keys
from conveyor.connect.runtime.definitions import config_infos, parse_config
from conveyor.connect.runtime.plugins import Connector, Plugins, class_path
from conveyor.connect.runtime.topic_log import TopicLog
from conveyor.errors import ConfigurationError, ConveyorError

__all__ = ["ConnectCluster", "ConnectError", "WorkerSettings"]


class ConnectError(ConveyorError):
    """A call of a connect worker's REST API that cannot be done.

    It is answered with ``status`` and Kafka Connect's ``{"error_code", "message"}``.

    Raised when a connector or task is not there (404), a connector of that name exists
    already (409), or a configuration is invalid (400: each field's errors in the message).

    What to do: read the message; for a 400, ``PUT /connector-plugins/{plugin}/config/validate``
    lists every field's errors.

    Attributes:
        status: the HTTP status of the answer.
        message: what the answer says."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class WorkerSettings:
    """A worker's settings: the Kafka it runs on, its cluster (``group``), its name in
    statuses (``worker_id``: host:port of its REST API), the slots tasks spread over and the
    replication factor of the topics it creates (``None``: the cluster's default)."""

    kafka: Mapping[str, Any]
    worker_id: str
    group: str = "conveyor-connect"
    slots: int = 24
    replication_factor: int | None = None
    session_timeout: float = 10.0
    topics: dict[str, str] = field(default_factory=dict)

    def topic(self, role: str) -> str:
        """The topic of ``role`` (``configs``, ``status``, ``offsets``, ``slots``)."""
        return self.topics.get(role) or f"{self.group}-{role}"


class ConnectCluster:
    """The shared state of the connect cluster ``settings.group`` (see the module);
    ``on_change`` is called (on the topic's thread) after each configuration record read."""

    def __init__(
        self,
        settings: WorkerSettings,
        plugins: Plugins | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.plugins = plugins or Plugins()
        self.configs = Configs()
        self.statuses = Statuses()
        self._on_change = on_change
        kafka, replicas = settings.kafka, settings.replication_factor
        self._config_log = TopicLog(
            kafka, settings.topic("configs"), self._config_read, replication_factor=replicas
        )
        self._status_log = TopicLog(
            kafka, settings.topic("status"), self.statuses.apply, replication_factor=replicas
        )

    def start(self, create: bool = True) -> None:
        """Read the cluster's topics to their end, then follow them; ``create``: make them
        when missing (a worker does; a reader such as the web UI does not).

        Raises:
            KafkaError: a topic is missing (``create`` false) or could not be read.
        """
        self._status_log.start(create=create)
        try:
            self._config_log.start(create=create)
        except BaseException:
            self._status_log.stop()
            raise

    def stop(self) -> None:
        self._config_log.stop()
        self._status_log.stop()

    def _config_read(self, key: str, value: Any) -> None:
        self.configs.apply(key, value)
        if self._on_change is not None:
            self._on_change()

    def write_status(self, key: str, status: Mapping[str, Any] | None) -> None:
        """Write a connector's or task's status (``None``: delete it)."""
        self._status_log.write(key, status)

    def tasks_of(self, name: str) -> tuple[Connector, list[dict[str, Any]]]:
        """The connector's plugin and each task's parsed configuration."""
        plugin, raw = self._plugin_and_tasks(name)
        return plugin, [parse_config(plugin.all_fields(), one) for one in raw]

    def _plugin_and_tasks(self, name: str) -> tuple[Connector, list[dict[str, str]]]:
        raw = self.config(name)
        plugin = self.plugins.find(raw["connector.class"])()
        count = parse_config(plugin.all_fields(), raw)["tasks.max"]
        tasks = [{k: str(v) for k, v in one.items()} for one in plugin.task_configs(raw, count)]
        return plugin, tasks

    # -- what the REST API asks ---------------------------------------------------------------

    def connector_names(self) -> list[str]:
        return self.configs.names()

    def info(self, name: str) -> dict[str, Any]:
        """Kafka Connect's ``ConnectorInfo``: name, configuration, tasks and type."""
        config = self.config(name)
        try:
            plugin, task_configs = self.tasks_of(name)
            kind, count = plugin.type, len(task_configs)
        except Exception:
            kind, count = "unknown", 0
        return {
            "name": name,
            "config": config,
            "tasks": [{"connector": name, "task": task} for task in range(count)],
            "type": kind,
        }

    def config(self, name: str) -> dict[str, str]:
        """A connector's configuration (404 when there is none)."""
        config = self.configs.config(name)
        if config is None:
            raise ConnectError(404, f"Connector {name} not found")
        return config

    def status(self, name: str) -> dict[str, Any]:
        """Kafka Connect's ``ConnectorStateInfo``: the connector's state and each task's."""
        info = self.info(name)
        connector = self.statuses.connector(name) or {"state": "UNASSIGNED", "worker_id": ""}
        reported = self.statuses.tasks(name)
        tasks = []
        for task in range(len(info["tasks"])):
            one = reported.get(task) or {"state": "UNASSIGNED", "worker_id": ""}
            tasks.append({"id": task, **one})
        return {"name": name, "connector": connector, "tasks": tasks, "type": info["type"]}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        tasks = self.status(name)["tasks"]
        if not 0 <= task < len(tasks):
            raise ConnectError(404, f"Task {name}-{task} not found")
        return dict(tasks[task])

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        """Kafka Connect's ``TaskInfo`` list: each task's id and configuration."""
        _, tasks = self._plugin_and_tasks(name)
        return [
            {"id": {"connector": name, "task": task}, "config": config}
            for task, config in enumerate(tasks)
        ]

    def validate(self, plugin_name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka Connect's ``ConfigInfos`` for ``config`` given to plugin ``plugin_name``."""
        try:
            plugin = self.plugins.find(plugin_name)
        except ConfigurationError as error:
            raise ConnectError(404, str(error)) from None
        config = {k: str(v) for k, v in config.items()}
        return config_infos(class_path(plugin), plugin.all_fields(), config, plugin.errors(config))

    def put(self, name: str, config: Mapping[str, Any], initial_state: str = "STARTED") -> bool:
        """Create or replace connector ``name``'s configuration; whether it was created.

        Raises:
            ConnectError: 400 for an invalid configuration (every field's errors named).
        """
        config = {k: str(v) for k, v in config.items()}
        config.setdefault("name", name)
        if config["name"] != name:
            raise ConnectError(
                400,
                "Connector name configuration ({}) doesn't match connector "
                "name in the URL ({})".format(config["name"], name),
            )
        class_name = config.get("connector.class")
        if not class_name:
            raise ConnectError(400, f"Connector config {config} contains no connector type")
        try:
            plugin = self.plugins.find(class_name)
        except ConfigurationError as error:
            raise ConnectError(400, str(error)) from None
        errors = plugin.errors(config)
        if errors:
            listed = "\n".join(
                f"{field_name}: {message}"
                for field_name, messages in errors.items()
                for message in messages
            )
            count = sum(len(messages) for messages in errors.values())
            raise ConnectError(
                400,
                f"Connector configuration is invalid and contains the following {count} "
                f"error(s):\n{listed}\nYou can also find the above list of errors at the "
                f"endpoint `/connector-plugins/{class_path(plugin)}/config/validate`",
            )
        created = self.configs.config(name) is None
        if created:
            self._config_log.write(keys.target(name), {"state": _target(initial_state)})
        self._config_log.write(keys.connector(name), {"properties": config})
        return created

    def create(self, name: str, config: Mapping[str, Any], initial_state: str = "STARTED") -> None:
        """``POST /connectors``: like :meth:`put`, refused (409) for a name in use."""
        if self.configs.config(name) is not None:
            raise ConnectError(409, f"Connector {name} already exists")
        self.put(name, config, initial_state)

    def delete(self, name: str) -> None:
        self.config(name)  # 404 for a connector that is not there
        reported = self.statuses.tasks(name)  # every task reported, whatever its config says now
        self._config_log.write(keys.connector(name), None)
        self._config_log.write(keys.target(name), None)
        self.write_status(keys.connector_status(name), None)
        for task in reported:
            self.write_status(keys.task_status(name, task), None)

    def set_target(self, name: str, state: str) -> None:
        self.config(name)
        self._config_log.write(keys.target(name), {"state": _target(state)})

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> None:
        self.config(name)
        self._config_log.write(
            keys.restart_connector(name),
            {"include-tasks": include_tasks, "only-failed": only_failed, "id": uuid.uuid4().hex},
        )

    def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)
        self._config_log.write(keys.restart_task(name, task), {"id": uuid.uuid4().hex})

    def plugin_list(self) -> list[dict[str, str]]:
        return [
            {"class": class_path(plugin), "type": plugin.type, "version": plugin.version}
            for plugin in self.plugins.classes()
        ]


def _target(state: str) -> str:
    state = {"RUNNING": "STARTED"}.get(state.upper(), state.upper())
    if state not in TARGETS:
        raise ConnectError(
            400, f"Invalid initial state {state}: must be RUNNING, PAUSED or STOPPED"
        )
    return state
