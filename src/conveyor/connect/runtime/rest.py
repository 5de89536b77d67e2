"""Kafka Connect's REST API over a connect cluster (a worker's ``cluster``), with Connect's
paths, JSON shapes and status codes, so its clients (``curl`` scripts, Python packages,
Terraform providers) drive Conveyor's workers unchanged. An error answers
``{"error_code": <status>, "message": ...}`` as Connect's do."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from conveyor._version import __version__
from conveyor.connect.runtime.connect_cluster import ConnectCluster, ConnectError

__all__ = ["Gate", "create_rest_app"]

_log = logging.getLogger("conveyor.connect")
Handler = Callable[[Request], Response]

Gate = Callable[[Request, str | None, str], Awaitable[None]]
"""``await gate(request, action, target)`` before each call: ``action`` is ``None`` for a read
(``GET``, a validation), else ``configure``, ``delete``, ``pause``, ``resume``, ``stop`` or
``restart``; ``target`` is ``connector <name>`` (``connector <name> task <id>``). It refuses
by raising :class:`ConnectError` (401, 403)."""


def _target_of(request: Request, body: Any = None) -> str:
    """What a call acts on: ``connector <name>`` (from the path, or a create's body), with
    `` task <id>`` for a task's call."""
    params = request.path_params
    name = params.get("name")
    if name is None and isinstance(body, dict):
        config = body.get("config")
        name = body.get("name") or (config.get("name") if isinstance(config, dict) else None)
    target = f"connector {name}" if name else "connectors"
    return target if params.get("task") is None else f"{target} task {params['task']}"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message}, status_code=status)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


class _Api:
    def __init__(self, cluster: ConnectCluster) -> None:
        self.cluster = cluster

    def root(self, request: Request) -> Response:
        return JSONResponse(
            {
                "version": __version__,
                "commit": "conveyor",
                "kafka_cluster_id": self.cluster.settings.group,
            }
        )

    def connectors(self, request: Request, body: Any = None) -> Response:
        cluster = self.cluster
        if request.method == "POST":
            if not isinstance(body, dict) or not isinstance(body.get("config"), dict):
                raise ConnectError(400, 'The request body must be {"name": ..., "config": {...}}')
            name = body.get("name") or body["config"].get("name")
            if not isinstance(name, str) or not name:
                raise ConnectError(400, "Connector name must not be empty")
            cluster.create(name, body["config"], str(body.get("initial_state", "RUNNING")))
            return JSONResponse(cluster.info(name), status_code=201)
        names = cluster.connector_names()
        expand = request.query_params.getlist("expand")
        if not expand:
            return JSONResponse(names)
        expanded: dict[str, Any] = {}
        for name in names:
            one: dict[str, Any] = {}
            if "status" in expand:
                one["status"] = cluster.status(name)
            if "info" in expand:
                one["info"] = cluster.info(name)
            expanded[name] = one
        return JSONResponse(expanded)

    def connector(self, request: Request, body: Any = None) -> Response:
        name = request.path_params["name"]
        if request.method == "DELETE":
            self.cluster.delete(name)
            return Response(status_code=204)
        return JSONResponse(self.cluster.info(name))

    def config(self, request: Request, body: Any = None) -> Response:
        name = request.path_params["name"]
        if request.method == "PUT":
            if not isinstance(body, dict):
                raise ConnectError(400, "The request body must be the connector's configuration")
            created = self.cluster.put(name, body)
            return JSONResponse(self.cluster.info(name), status_code=201 if created else 200)
        return JSONResponse(self.cluster.config(name))

    def status(self, request: Request) -> Response:
        return JSONResponse(self.cluster.status(request.path_params["name"]))

    def pause(self, request: Request) -> Response:
        self.cluster.set_target(request.path_params["name"], "PAUSED")
        return Response(status_code=202)

    def resume(self, request: Request) -> Response:
        self.cluster.set_target(request.path_params["name"], "STARTED")
        return Response(status_code=202)

    def stop(self, request: Request) -> Response:
        self.cluster.set_target(request.path_params["name"], "STOPPED")
        return Response(status_code=204)

    def restart(self, request: Request) -> Response:
        name = request.path_params["name"]
        include_tasks, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")
        self.cluster.restart(name, include_tasks=include_tasks, only_failed=only_failed)
        if not include_tasks and not only_failed:
            return Response(status_code=204)
        status = self.cluster.status(name)  # what restarts shows RESTARTING (KIP-745)
        connector = status["connector"]
        if not only_failed or connector["state"] == "FAILED":
            connector["state"] = "RESTARTING"
        for task in status["tasks"] if include_tasks else ():
            if not only_failed or task["state"] == "FAILED":
                task["state"] = "RESTARTING"
        return JSONResponse(status, status_code=202)

    def tasks(self, request: Request) -> Response:
        return JSONResponse(self.cluster.task_configs(request.path_params["name"]))

    def task_status(self, request: Request) -> Response:
        params = request.path_params
        return JSONResponse(self.cluster.task_status(params["name"], params["task"]))

    def task_restart(self, request: Request) -> Response:
        params = request.path_params
        self.cluster.restart_task(params["name"], params["task"])
        return Response(status_code=204)

    def topics(self, request: Request) -> Response:
        name = request.path_params["name"]
        config = self.cluster.config(name)
        topics = [t.strip() for t in config.get("topics", config.get("topic", "")).split(",")]
        return JSONResponse({name: {"topics": [t for t in topics if t]}})

    def plugins(self, request: Request) -> Response:
        return JSONResponse(self.cluster.plugin_list())

    def validate(self, request: Request, body: Any = None) -> Response:
        if not isinstance(body, dict):
            raise ConnectError(400, "The request body must be the connector's configuration")
        return JSONResponse(self.cluster.validate(request.path_params["plugin"], body))


def _json_body(request: Request, raw: bytes) -> Any:
    """A call's JSON body; 415 unless it says it is JSON (as Connect: a page of another site
    cannot then send one with a form)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if raw and media != "application/json":
        raise ConnectError(
            415, "HTTP 415 Unsupported Media Type: send Content-Type: application/json"
        )
    try:
        return json.loads(raw or b"null")
    except ValueError as error:
        raise ConnectError(400, f"Cannot deserialize the request body: {error}") from None


def _name_in(raw: bytes) -> Any:
    """The body as far as the gate's target needs it (a create's name), or ``None``."""
    try:
        return json.loads(raw) if raw.startswith(b"{") else None
    except ValueError:
        return None


def _endpoint(
    handler: Callable[..., Response],
    gate: Gate | None,
    action: str | None = None,
    reads_body: bool = False,
) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            has_body = reads_body and request.method in ("POST", "PUT")
            raw = await request.body() if has_body else b""
            if gate is not None:  # first: a caller not let in learns nothing of the body
                changes = action if request.method != "GET" else None
                await gate(request, changes, _target_of(request, _name_in(raw)))
            body = _json_body(request, raw) if has_body else None
            if has_body:
                return await run_in_threadpool(handler, request, body)
            return await run_in_threadpool(handler, request)
        except ConnectError as error:
            return _error(error.status, error.message)
        except Exception as error:
            _log.exception("connect REST: %s %s failed", request.method, request.url.path)
            return _error(500, f"{type(error).__name__}: {error}")

    return endpoint


def create_rest_app(cluster: ConnectCluster, gate: Gate | None = None) -> Starlette:
    """The REST API of ``cluster`` (``worker.cluster``) as an ASGI app (serve it with
    uvicorn, or mount it in your own); ``gate`` checks each call first (none: every call is
    allowed)."""
    api = _Api(cluster)
    name = "/connectors/{name}"
    task = f"{name}/tasks/{{task:int}}"

    def route(
        path: str,
        handler: Callable[..., Response],
        methods: list[str],
        action: str | None = None,
        body: bool = False,
    ) -> Route:
        return Route(path, _endpoint(handler, gate, action, body), methods=methods)

    routes = [
        route("/", api.root, ["GET"]),
        route("/connectors", api.connectors, ["GET", "POST"], "configure", body=True),
        route(name, api.connector, ["GET", "DELETE"], "delete"),
        route(f"{name}/config", api.config, ["GET", "PUT"], "configure", body=True),
        route(f"{name}/status", api.status, ["GET"]),
        route(f"{name}/pause", api.pause, ["PUT"], "pause"),
        route(f"{name}/resume", api.resume, ["PUT"], "resume"),
        route(f"{name}/stop", api.stop, ["PUT"], "stop"),
        route(f"{name}/restart", api.restart, ["POST"], "restart"),
        route(f"{name}/tasks", api.tasks, ["GET"]),
        route(f"{task}/status", api.task_status, ["GET"]),
        route(f"{task}/restart", api.task_restart, ["POST"], "restart"),
        route(f"{name}/topics", api.topics, ["GET"]),
        route("/connector-plugins", api.plugins, ["GET"]),
        route("/connector-plugins/{plugin}/config/validate", api.validate, ["PUT"], body=True),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return _error(status, getattr(exc, "detail", "") or f"{request.url.path} not found")

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
