"""The web UI's actions (POST, behind the guard): republish a message, redrive dead letters,
send a command to the app's processes, pause, resume or restart a connector. Each answers JSON to an API call, else a page."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from conveyor.errors import ConfigurationError
from conveyor.web.commands import (
    ANY_PROCESS,
    COMMANDS,
    FLEET_COMMANDS,
    PARTITION_COMMANDS,
    fleet_members,
)
from conveyor.web.reading.explorer_query import parse_time
from conveyor.web.ui.connect_views import CONNECTOR_ACTIONS
from conveyor.web.ui.guard import Guard, body_of, form_of
from conveyor.web.ui.pages import offset_params
from conveyor.web.ui.schedule_views import TASK_ACTIONS
from conveyor.web.ui.views import NotFound

if TYPE_CHECKING:
    from conveyor.web.ui.rendering import Ui

__all__ = ["Actions"]


async def _fields_of(request: Request) -> dict[str, Any] | None:
    """A JSON request's fields (``None`` for a form post)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = json.loads(await body_of(request))
        except ValueError:
            raise ConfigurationError("the request body is not JSON", "body") from None
        if not isinstance(body, dict):
            raise ConfigurationError("the request body must be a JSON object", "body")
        return body
    return None


class Actions:
    """The actions' handlers."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.guard = ui.guard
        self.explorer = ui.explorer

    def _writable(self, topic: str) -> None:
        """Refuse to send messages into the web UI's own topics or Kafka's internal ones."""
        if topic in self.ui.web.topics.names or topic.startswith("__"):
            raise ConfigurationError(f"{topic!r} is internal: messages are not sent there", "to")

    async def republish(self, request: Request) -> Response:
        topic, partition, offset = offset_params(request)
        body = await _fields_of(request)
        fields = body if body is not None else await form_of(request)
        target = str(fields.get("to") or topic).strip()
        await self.guard.authorize(
            request, "republish", f"{topic}/{partition}@{offset} -> {target}", body
        )
        self._writable(target)
        admin = self.ui.views.admin  # the request's own fault first, before the read
        if target != topic and target not in set(await run_in_threadpool(admin.list_topics)):
            raise ConfigurationError(f"topic {target!r} does not exist", "to")
        raw = await run_in_threadpool(self.explorer.explorer.raw_message, topic, partition, offset)
        if raw is None:
            raise NotFound("message", f"{topic}/{partition}@{offset}")
        producer = self.ui.app.producer
        report = await run_in_threadpool(
            lambda: producer.produce_sync(
                topic=target,
                payload=raw.value(),
                key=raw.key(),
                headers=list(raw.headers() or []),
                timeout=30,
            )
        )
        result = {
            "status": "done",
            "from": f"{topic}/{partition}@{offset}",
            "topic": report.topic,
            "partition": report.partition,
            "offset": report.offset,
        }
        return self.ui.answer(
            request, body is not None, "Republished", result, "republished.html", "explorer"
        )

    async def redrive(self, request: Request) -> Response:
        topic = request.path_params["topic"]
        body = await _fields_of(request)
        fields = body if body is not None else await form_of(request)
        to = str(fields.get("to") or "").strip() or None
        await self.guard.authorize(request, "redrive", f"{topic} -> {to or 'original'}", body)
        if to is not None:
            self._writable(to)
        if body is not None:
            refs = [str(ref) for ref in body.get("refs") or []]
        else:
            refs = (
                [str(ref) for ref in fields.getlist("refs")] if hasattr(fields, "getlist") else []
            )
        everything = str(fields.get("all") or "") in ("1", "true", "True")
        job = await run_in_threadpool(self.explorer.redrive, topic, refs, everything, to)
        if body is not None:
            return JSONResponse(job.to_dict(), status_code=202)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/dlq/{quote(topic)}/redrives/{job.id}", status_code=303)

    async def discard(self, request: Request) -> Response:
        """Discard dead jobs (``refs``) of a dead-job topic."""
        topic = request.path_params["topic"]
        body = await _fields_of(request)
        fields = body if body is not None else await form_of(request)
        await self.guard.authorize(request, "discard", topic, body)
        if body is not None:
            refs = [str(ref) for ref in body.get("refs") or []]
        else:
            refs = (
                [str(ref) for ref in fields.getlist("refs")] if hasattr(fields, "getlist") else []
            )
        noted = await run_in_threadpool(self.explorer.discard, topic, refs)
        if body is not None:
            return JSONResponse({"discarded": noted})
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/dlq/{quote(topic)}", status_code=303)

    async def cancel_schedule(self, request: Request) -> Response:
        """Cancel one pending scheduled message (``id`` in the path)."""
        schedule_id = request.path_params["schedule_id"]
        body = await _fields_of(request)
        await self.guard.authorize(request, "cancel", schedule_id, body)
        result = await run_in_threadpool(self.ui.schedules.cancel, schedule_id)
        if body is not None:
            return JSONResponse(result)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/schedules", status_code=303)

    async def task(self, request: Request) -> Response:
        """Run a recurring task now, disable or enable it (``task``: its name)."""
        action = request.path_params["action"]
        if action not in TASK_ACTIONS:
            raise NotFound("task action", action)
        body = await _fields_of(request)
        fields = body if body is not None else await form_of(request)
        name = str(fields.get("task") or "").strip()
        if not name:
            raise ConfigurationError("name the recurring task (the task field)", "task")
        guard = self.guard
        await guard.authorize(request, action, name, body)
        by = f"web UI ({guard.user(request) or 'anonymous'})"
        result = await run_in_threadpool(self.ui.schedules.task, action, name, by)
        if body is not None:
            return JSONResponse(result)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/schedules", status_code=303)

    async def connector(self, request: Request) -> Response:
        """Pause, resume or restart a connector of the connect cluster (``task`` field: restart
        that task only)."""
        name, action = request.path_params["name"], request.path_params["action"]
        if action not in CONNECTOR_ACTIONS:
            raise NotFound("connector action", action)
        body = await _fields_of(request)
        fields = body if body is not None else await form_of(request)
        raw_task = str(fields.get("task") or "").strip()
        if raw_task and not raw_task.isdigit():
            raise ConfigurationError(f"task must be a task's number, not {raw_task!r}", "task")
        task = int(raw_task) if raw_task else None
        target = f"connector {name}" + ("" if task is None else f" task {task}")
        await self.guard.authorize(request, action, target, body)
        result = await run_in_threadpool(self.ui.connectors.act, name, action, task)
        if body is not None:
            return JSONResponse(result)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/connectors", status_code=303)

    async def command(self, request: Request) -> Response:
        body = await _fields_of(request)
        process = request.path_params.get("process_id")
        raw_fields = body if body is not None else dict(await form_of(request))
        name = str(raw_fields.get("command") or "")
        if name not in COMMANDS:
            raise ConfigurationError(
                f"unknown command {name!r}; commands: {', '.join(COMMANDS)}", "command"
            )
        process = process or (str(raw_fields.get("process") or "") or None)
        if process == ANY_PROCESS and name in FLEET_COMMANDS:
            return await self._fleet_command(request, name, raw_fields, body)
        arguments, target = _arguments(name, raw_fields, process)
        guard = self.guard
        await guard.authorize(request, name, target, body if body is not None else raw_fields)
        timeout = _timeout(raw_fields)
        commander, by = self.ui.web.commander, _issuer(request)
        result = await run_in_threadpool(
            lambda: commander().send(name, process=process, by=by, timeout=timeout, **arguments)
        )
        status = 200 if result.done else 504 if result.status == "timed out" else 409
        return self.ui.answer(
            request,
            body is not None,
            f"{name}: {result.status}",
            result.to_dict(),
            "command_result.html",
            "processes",
            status,
        )

    async def _fleet_command(
        self, request: Request, name: str, raw_fields: dict[str, Any], body: dict[str, Any] | None
    ) -> Response:
        """Quiet or stop every process (of ``group``): the policy is asked for the action on
        ``*`` (``* in group G``), and the answer lists each process the reports show running."""
        group = str(raw_fields.get("group") or "").strip() or None
        target = ANY_PROCESS if group is None else f"{ANY_PROCESS} in group {group}"
        await self.guard.authorize(request, name, target, body if body is not None else raw_fields)
        timeout = _timeout(raw_fields)
        data, views = self.ui.data, self.ui.views
        await run_in_threadpool(data.wait_ready, 3.0)
        expected = fleet_members(data.states(), views.clock(), group)
        commander, by = self.ui.web.commander, _issuer(request)
        result = await run_in_threadpool(
            lambda: commander().send_all(
                name, group=group, expected=expected, by=by, timeout=timeout
            )
        )
        status = 200 if result.done else 409 if result.status == "refused" else 504
        return self.ui.answer(
            request,
            body is not None,
            f"{name} to {result.scope}: {result.status}",
            result.to_dict(),
            "fleet_result.html",
            "processes",
            status,
        )


def _timeout(raw_fields: dict[str, Any]) -> float:
    """A command's wait for its answers: the ``timeout`` field (seconds, 0.5 to 60; 10)."""
    try:
        return min(max(float(str(raw_fields.get("timeout") or 10)), 0.5), 60.0)
    except ValueError:
        raise ConfigurationError("timeout must be a number of seconds", "timeout") from None


def _issuer(request: Request) -> str:
    """Who sent a command, as the process logs it."""
    return f"web UI ({Guard.user(request) or 'anonymous'})"


def _arguments(
    name: str, raw_fields: dict[str, Any], process: str | None
) -> tuple[dict[str, Any], str]:
    """A command's arguments from the form or JSON fields, and what it targets (for the
    guard's log): a partition command's topic, partition and options, checked."""
    if name not in PARTITION_COMMANDS:
        return {}, process or ""
    arguments: dict[str, Any] = {"topic": str(raw_fields.get("topic") or "")}
    try:
        arguments["partition"] = int(str(raw_fields.get("partition")))
    except (TypeError, ValueError):
        raise ConfigurationError(
            "a partition command needs a partition number", "partition"
        ) from None
    fields = dict(raw_fields)
    to = str(fields.pop("to", "") or "").strip()  # the page's one seek field
    if name == "seek" and to:
        fields["offset" if to.isdigit() else "time"] = to
    for option in ("until", "offset", "time", "group", "store"):
        value = fields.get(option)
        if value in (None, ""):
            continue
        if option == "offset" and str(value).isdigit():
            value = int(str(value))
        elif option in ("until", "time") and isinstance(value, str):
            value = parse_time(value).isoformat()  # as in the explorer: no zone is UTC
        arguments[option] = value
    target = f"{arguments['topic']}/{arguments['partition']}"
    if process:
        target += f" in {process}"
    return arguments, target
