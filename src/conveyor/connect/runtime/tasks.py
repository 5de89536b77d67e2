"""One connector task as a worker runs it: a sink task is a small app of its own (one sink
route per topic, in the consumer group ``connect-<connector>``, so that the tasks of one
connector share the topics' partitions as Kafka Connect's do); it reports a crash so the
worker can mark the task failed with its trace."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from conveyor.connect.runtime.plugins import SinkConnector
from conveyor.instrumentation import events as ev

__all__ = ["MakeApp", "RunningTask", "TaskApp", "TaskHandle", "start_sink_task"]

_log = logging.getLogger("conveyor.connect")


class TaskApp(Protocol):
    """What a worker needs of the app a sink task runs in (``conveyor.App``)."""

    routes: Any
    monitor: Any
    crash: BaseException | None

    def start(self) -> None: ...

    def stop_and_wait(self) -> None: ...


MakeApp = Callable[..., TaskApp]
"""Makes a task's app: ``make_app(client_id=..., kafka={...})`` (``conveyor.App``)."""


class TaskHandle(Protocol):
    """What runs a task: a sink's app, a source's runner."""

    @property
    def trace(self) -> str | None:
        """The trace of what made the task fail, else ``None``."""
        ...

    def stop(self) -> None: ...


class RunningTask:
    """A task this worker runs: its configuration (a change restarts it) and what runs it."""

    def __init__(self, name: str, task: int, config: Mapping[str, Any], handle: TaskHandle) -> None:
        self.name = name
        self.task = task
        self.config = dict(config)
        self.handle = handle

    @property
    def trace(self) -> str | None:
        return self.handle.trace

    def stop(self) -> None:
        try:
            self.handle.stop()
        except Exception:
            _log.exception("connector %s task %d did not stop cleanly", self.name, self.task)


class _SinkApp:
    def __init__(self, app: TaskApp) -> None:
        self.app = app

    @property
    def trace(self) -> str | None:
        crash = self.app.crash
        return None if crash is None else "".join(traceback.format_exception(crash))

    def stop(self) -> None:
        self.app.stop_and_wait()


def start_sink_task(
    make_app: MakeApp,
    kafka: Mapping[str, Any],
    plugin: SinkConnector,
    name: str,
    task: int,
    config: Mapping[str, Any],
    on_crash: Callable[[], None],
) -> RunningTask:
    """Start task ``task`` of sink connector ``name`` (``config``: its parsed configuration).

    Raises:
        Exception: whatever the plugin or the sink raised while being made or opened (the
            task fails with it).
    """
    app = make_app(
        client_id=f"connect-{name}-{task}",
        kafka={**kafka, "group.id": f"connect-{name}", "auto.offset.reset": "earliest"},
    )
    options: dict[str, Any] = {}
    dead_letters = config.get("errors.deadletterqueue.topic.name")
    if dead_letters:
        options["dead_letter_queue"] = dead_letters
        options["retries"] = config["errors.retry.limit"]
    for topic in config["topics"]:
        sink = plugin.sink({**config, "task.id": task, "task.topic": topic})
        app.routes.sink(topic, sink, **options)

    def crashed(event: Any) -> None:
        if event.get("type") == "app.crash":
            on_crash()

    app.monitor.subscribe(ev.ERROR_OCCURRED, crashed)
    app.start()
    return RunningTask(name, task, config, _SinkApp(app))
