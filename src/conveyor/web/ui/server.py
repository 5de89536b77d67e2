"""The web UI as a Starlette app: one route per page, each also under ``/api`` as JSON; the
actions (republish, redrive, commands) behind :class:`~conveyor.web.ui.guard.Guard`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from conveyor._version import __version__
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.metrics import CONTENT_TYPE
from conveyor.web.access import Access
from conveyor.web.commands import COMMANDS, PARTITION_COMMANDS
from conveyor.web.data import WebData
from conveyor.web.explorer import Explorer, Filters, Start, parse_time
from conveyor.web.ui.charts import bar_chart, line_chart
from conveyor.web.ui.explorer_views import ExplorerViews
from conveyor.web.ui.guard import CSRF_FIELD, Guard, body_of, form_of, safe_next, same_token
from conveyor.web.ui.views import NotFound, Page, Views

if TYPE_CHECKING:
    from conveyor.web.ui.host import UiHost

__all__ = ["NAVIGATION", "create_asgi"]

_log = logging.getLogger("conveyor.web")

_NOTHING = "\u2013"  # an en dash: shown for a missing value

NAVIGATION = (
    ("dashboard", "Dashboard", ""),
    ("processes", "Processes", "/processes"),
    ("jobs", "Jobs", "/jobs"),
    ("routing", "Routing", "/routing"),
    ("lags", "Lags", "/lags"),
    ("errors", "Errors", "/errors"),
    ("topics", "Topics", "/topics"),
    ("explorer", "Explorer", "/explorer"),
    ("dlq", "DLQ", "/dlq"),
    ("cluster", "Cluster", "/cluster"),
    ("status", "Status", "/status"),
)


def _timestamp(value: Any) -> Markup:
    """``<time>`` in UTC, which conveyor.js shows in the browser's zone."""
    if value is None:
        return Markup(_NOTHING)
    moment = datetime.fromtimestamp(float(value), UTC)
    return Markup(
        f'<time datetime="{moment.isoformat()}" data-ts="{float(value)}">{moment:%Y-%m-%d %H:%M:%S} UTC</time>'
    )


def _bytes(value: Any) -> str:
    amount = float(value or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"


def _duration(value: Any) -> str:
    if value is None:
        return _NOTHING
    seconds = float(value)
    if seconds < 0.01:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _environment() -> Environment:
    environment = Environment(
        undefined=StrictUndefined,
        loader=PackageLoader("conveyor.web.ui", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        ts=_timestamp,
        bytes=_bytes,
        duration=_duration,
        percent=lambda v: f"{100 * float(v or 0):.0f} %",
        number=lambda v: (
            _NOTHING if v is None else f"{v:,}" if isinstance(v, int) else f"{float(v):,.2f}"
        ),
    )
    environment.globals.update(
        line_chart=lambda *a, **k: Markup(line_chart(*a, **k)),
        bar_chart=lambda *a, **k: Markup(bar_chart(*a, **k)),
        navigation=NAVIGATION,
        version=__version__,
    )
    return environment


def create_asgi(web: UiHost, data: WebData, access: Access | None = None) -> Any:
    """The UI of ``web`` (an app's ``app.web``), reading ``data`` (started at the first
    request), behind ``access`` (an open UI when ``None``)."""
    app = web.app
    views = Views(web, data)
    explorer = ExplorerViews(app, lambda: views.admin, Explorer(app.settings.kafka))
    environment = _environment()
    guard = Guard(access or Access())

    def html(
        request: Request, template: str, page: Page, active: str, status: int = 200
    ) -> Response:
        context = {"client_id": app.settings.client_id, **page.data, "title": page.title,
                   "active": active, "base": request.scope.get("root_path", ""), "request": request,
                   "csrf_field": CSRF_FIELD, "csrf_token": guard.session(request).csrf,
                   "user": guard.user(request), "login": guard.access.login,
                   "read_only": guard.access.read_only,
                   "can": lambda action, target="": guard.can(request, action, target)}  # fmt: skip
        body = environment.get_template(template).render(context)
        return HTMLResponse(body, status_code=status)

    def detail(
        name: str,
        template: str,
        path: str,
        build: Callable[[Request], Page],
        active: str,
        api_path: str | None = None,
    ) -> tuple[Route, Route]:
        """A page at ``path`` as HTML, and its data as JSON at ``/api{path}``."""

        def as_html(request: Request) -> Response:
            data.wait_ready(3.0)
            return html(request, template, build(request), active)

        def as_json(request: Request) -> Response:
            data.wait_ready(3.0)
            built = build(request)
            return JSONResponse({"title": built.title, **built.data})

        return Route(path, as_html, name=name), Route(
            api_path or f"/api{path}", as_json, name=f"api_{name}"
        )

    def page(name: str, template: str, build: Callable[[Request], Page]) -> tuple[Route, Route]:
        """A page of the navigation (the dashboard's JSON is /api/dashboard)."""
        path = next(p for n, _, p in NAVIGATION if n == name)
        return detail(name, template, path or "/", build, name, f"/api{path or '/dashboard'}")

    def number(request: Request, name: str, default: int = 1) -> int:
        try:
            return max(1, int(request.query_params.get(name, default)))
        except ValueError:
            return default

    def broker(request: Request) -> int | None:
        value = request.query_params.get("broker")
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            raise NotFound("broker", value) from None

    routes: list[Any] = []
    for pair in (
        page("dashboard", "dashboard.html", lambda r: views.dashboard(r.query_params.get("range", "1h"))),
        page("processes", "processes.html", lambda r: views.processes(number(r, "page"))),
        detail("process", "process.html", "/processes/{process_id:path}", lambda r: views.process(r.path_params["process_id"]), "processes"),
        page("jobs", "jobs.html", lambda r: views.jobs()),
        page("routing", "routing.html", lambda r: views.routing()),
        page("lags", "lags.html", lambda r: views.lags()),
        page("errors", "errors.html", lambda r: views.errors(
            {k: r.query_params[k] for k in ("type", "topic", "process", "q") if r.query_params.get(k)}, number(r, "page"))),
        detail("error", "error.html", "/errors/{error_id}", lambda r: views.error(r.path_params["error_id"]), "errors"),
        page("topics", "topics.html", lambda r: views.topics(number(r, "page"), r.query_params.get("internal") == "1")),
        detail("topic", "topic.html", "/topics/{name}", lambda r: views.topic(r.path_params["name"]), "topics"),
        page("cluster", "cluster.html", lambda r: views.cluster(broker(r), r.query_params.get("all") == "1")),
        page("status", "status.html", lambda r: views.status()),
    ):  # fmt: skip
        routes.extend(pair)

    # -- the explorer -------------------------------------------------------------------------

    def whole(
        request: Request, name: str, default: int, low: int = 0, high: int | None = None
    ) -> int:
        """A whole number from the query, or a ConfigurationError naming it (a 400)."""
        text = request.query_params.get(name)
        if text in (None, ""):
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConfigurationError(f"{name} must be a whole number, not {text!r}", name) from None
        if value < low or (high is not None and value > high):
            raise ConfigurationError(f"{name} must be {low} to {high}, not {value}" if high is not None
                                     else f"{name} must be {low} or more, not {value}", name)  # fmt: skip
        return value

    def read_request(request: Request) -> tuple[Start, Filters]:
        query = request.query_params
        start = Start.parse(query.get("offset"), query.get("time"), query.get("newest"))
        return start, Filters.parse(dict(query))

    def explore(request: Request) -> Page:
        start, filters = read_request(request)
        return explorer.topic(request.path_params["topic"], whole(request, "partition", 0),
                              start, filters, whole(request, "limit", 50, 1, 1000))  # fmt: skip

    def export(request: Request) -> Response:
        start, filters = read_request(request)
        topic = request.path_params["topic"]
        partition = request.query_params.get("partition")
        chosen = None if partition in (None, "", "all") else [whole(request, "partition", 0)]
        lines = explorer.explorer.export(
            topic, chosen, start, filters, whole(request, "limit", 1000, 1, 100_000)
        )
        filename = "".join(c if c.isalnum() or c in "-_." else "_" for c in topic)
        return StreamingResponse(lines, media_type="application/x-ndjson", headers={
            "content-disposition": f'attachment; filename="{filename}.jsonl"'})  # fmt: skip

    def offset_params(request: Request) -> tuple[str, int, int]:
        params = request.path_params
        return params["topic"], int(params["partition"]), int(params["offset"])

    def explorer_home(request: Request) -> Response:
        """The explorer's first page; its topic form lands here and goes on to the topic."""
        topic = request.query_params.get("topic", "").strip()
        if topic:
            base = request.scope.get("root_path", "")
            return RedirectResponse(f"{base}/explorer/{quote(topic, safe='')}", status_code=303)
        return html(request, "explorer.html", explorer.index(), "explorer")

    routes.append(Route("/explorer", explorer_home, name="explorer_home"))
    for pair in (
        page("explorer", "explorer.html", lambda r: explorer.index()),
        detail("explorer_topic", "explorer_topic.html", "/explorer/{topic}", explore, "explorer"),
        detail("explorer_message", "explorer_message.html", "/explorer/{topic}/{partition:int}/{offset:int}",
               lambda r: explorer.message(*offset_params(r)), "explorer"),
        page("dlq", "dlqs.html", lambda r: explorer.dlqs()),
        detail("dlq_topic", "dlq.html", "/dlq/{topic}", lambda r: explorer.dlq(r.path_params["topic"]), "dlq"),
        detail("redrive", "redrive.html", "/dlq/{topic}/redrives/{job_id}",
               lambda r: explorer.redrive_page(r.path_params["topic"], r.path_params["job_id"]), "dlq"),
    ):  # fmt: skip
        routes.extend(pair)
    routes.append(Route("/explorer/{topic}/export", export, name="export"))

    # -- actions ------------------------------------------------------------------------------

    async def fields_of(request: Request) -> dict[str, Any] | None:
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

    def answer(request: Request, as_json: bool, title: str, result: dict[str, Any],
               template: str, active: str, status: int = 200) -> Response:  # fmt: skip
        if as_json:
            return JSONResponse(result, status_code=status)
        return html(request, template, Page(title, {"result": result}), active, status)

    def writable(topic: str) -> None:
        """Refuse to send messages into the web UI's own topics or Kafka's internal ones."""
        if topic in web.topics.names or topic.startswith("__"):
            raise ConfigurationError(f"{topic!r} is internal: messages are not sent there", "to")

    async def republish(request: Request) -> Response:
        topic, partition, offset = offset_params(request)
        body = await fields_of(request)
        fields = body if body is not None else await form_of(request)
        target = str(fields.get("to") or topic).strip()
        await guard.authorize(
            request, "republish", f"{topic}/{partition}@{offset} -> {target}", body
        )
        writable(target)
        raw = await run_in_threadpool(explorer.explorer.raw_message, topic, partition, offset)
        if raw is None:
            raise NotFound("message", f"{topic}/{partition}@{offset}")
        if target != topic and target not in set(await run_in_threadpool(views.admin.list_topics)):
            raise ConfigurationError(f"topic {target!r} does not exist", "to")
        report = await run_in_threadpool(lambda: app.producer.produce_sync(
            topic=target, payload=raw.value(), key=raw.key(), headers=list(raw.headers() or []), timeout=30))  # fmt: skip
        result = {"status": "done", "from": f"{topic}/{partition}@{offset}", "topic": report.topic,
                  "partition": report.partition, "offset": report.offset}  # fmt: skip
        return answer(
            request, body is not None, "Republished", result, "republished.html", "explorer"
        )

    async def redrive(request: Request) -> Response:
        topic = request.path_params["topic"]
        body = await fields_of(request)
        fields = body if body is not None else await form_of(request)
        to = str(fields.get("to") or "").strip() or None
        await guard.authorize(request, "redrive", f"{topic} -> {to or 'original'}", body)
        if to is not None:
            writable(to)
        if body is not None:
            refs = [str(ref) for ref in body.get("refs") or []]
        else:
            refs = (
                [str(ref) for ref in fields.getlist("refs")] if hasattr(fields, "getlist") else []
            )
        everything = str(fields.get("all") or "") in ("1", "true", "True")
        job = await run_in_threadpool(explorer.redrive, topic, refs, everything, to)
        if body is not None:
            return JSONResponse(job.to_dict(), status_code=202)
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/dlq/{quote(topic)}/redrives/{job.id}", status_code=303)

    async def command(request: Request) -> Response:
        body = await fields_of(request)
        process = request.path_params.get("process_id")
        raw_fields = body if body is not None else dict(await form_of(request))
        name = str(raw_fields.get("command") or "")
        if name not in COMMANDS:
            raise ConfigurationError(
                f"unknown command {name!r}; commands: {', '.join(COMMANDS)}", "command"
            )
        process = process or (str(raw_fields.get("process") or "") or None)
        arguments: dict[str, Any] = {}
        if name in PARTITION_COMMANDS:
            arguments["topic"] = str(raw_fields.get("topic") or "")
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
            for option in ("until", "offset", "time", "group"):
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
        else:
            target = process or ""
        await guard.authorize(request, name, target, body if body is not None else raw_fields)
        try:
            timeout = min(max(float(str(raw_fields.get("timeout") or 10)), 0.5), 60.0)
        except ValueError:
            raise ConfigurationError("timeout must be a number of seconds", "timeout") from None
        result = await run_in_threadpool(
            lambda: web.commander().send(name, process=process, by=f"web UI ({guard.user(request) or 'anonymous'})",
                                             timeout=timeout, **arguments))  # fmt: skip
        status = 200 if result.done else 504 if result.status == "timed out" else 409
        return answer(request, body is not None, f"{name}: {result.status}", result.to_dict(),
                      "command_result.html", "processes", status)  # fmt: skip

    routes += [
        Route(
            "/explorer/{topic}/{partition:int}/{offset:int}/republish", republish, methods=["POST"]
        ),
        Route(
            "/api/explorer/{topic}/{partition:int}/{offset:int}/republish",
            republish,
            methods=["POST"],
        ),
        Route("/dlq/{topic}/redrive", redrive, methods=["POST"]),
        Route("/api/dlq/{topic}/redrive", redrive, methods=["POST"]),
        Route("/processes/{process_id:path}/commands", command, methods=["POST"]),
        Route("/api/commands", command, methods=["POST"]),
    ]

    # -- signing in ---------------------------------------------------------------------------

    async def login(request: Request) -> Response:
        next_path = request.query_params.get("next", "/")
        if not guard.access.login:
            reason = ("Sign in to the application this UI is part of." if guard.access.authenticate
                      else "This UI asks nobody to sign in (see app.web.protect).")  # fmt: skip
            if guard.user(request) is not None:
                return RedirectResponse(safe_next(request, next_path), status_code=303)
            return html(
                request, "message.html", Page("Sign in", {"message": reason, "code": 200}), ""
            )
        problem = None
        if request.method == "POST":
            signed_in = await guard.login(request, next_path)
            if signed_in is not None:
                return signed_in
            problem = "Wrong password."
        return html(request, "login.html", Page("Sign in", {"next": next_path, "problem": problem}), "",
                    401 if problem else 200)  # fmt: skip

    async def logout(request: Request) -> Response:
        form = await form_of(request)
        token = form.get(CSRF_FIELD)
        if not isinstance(token, str) or not same_token(token, guard.session(request).csrf):
            raise HTTPException(403, "The logout form expired: reload the page and try again.")
        return guard.logout(request)

    routes += [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]

    def metrics(request: Request) -> Response:
        """The app's Prometheus metrics, when this process has them enabled."""
        metrics = web.metrics
        if metrics is None or not metrics.enabled:
            return Response(
                "metrics are not enabled in this process: call app.metrics.enable()\n",
                status_code=404,
                media_type="text/plain",
            )
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    routes.append(Route("/metrics", metrics, name="metrics"))
    routes.append(
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static")
    )

    def wants_json(request: Request) -> bool:
        return request.url.path.startswith(f"{request.scope.get('root_path', '')}/api")

    async def not_found(request: Request, exc: Exception) -> Response:
        message = str(exc) if isinstance(exc, NotFound) else f"no page at {request.url.path}"
        if wants_json(request):
            return JSONResponse({"error": message}, status_code=404)
        return html(
            request, "message.html", Page("Not found", {"message": message, "code": 404}), "", 404
        )

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return await not_found(request, exc)
        if wants_json(request):
            return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
        return html(
            request,
            "message.html",
            Page(str(exc.detail), {"message": str(exc.detail), "code": exc.status_code}),
            "",
            exc.status_code,
        )

    async def kafka_error(request: Request, exc: Exception) -> Response:
        _log.warning("a page could not be built: %s", exc)
        message = f"Kafka did not answer: {exc}"
        if wants_json(request):
            return JSONResponse({"error": message}, status_code=503)
        return html(
            request,
            "message.html",
            Page("Kafka unavailable", {"message": message, "code": 503}),
            "",
            503,
        )

    async def bad_input(request: Request, exc: Exception) -> Response:
        message = str(exc)
        if wants_json(request):
            return JSONResponse(
                {"error": message, "setting": getattr(exc, "setting", None)}, status_code=400
            )
        return html(
            request, "message.html", Page("Bad request", {"message": message, "code": 400}), "", 400
        )

    starlette = Starlette(
        routes=routes,
        exception_handlers={
            NotFound: not_found,
            HTTPException: http_error,
            ConfigurationError: bad_input,
            ConveyorError: kafka_error,
        },
    )
    starlette.state.views = views
    starlette.state.explorer = explorer
    starlette.state.guard = guard
    return guard.middleware(starlette)
