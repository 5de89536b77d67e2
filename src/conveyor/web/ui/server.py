"""The web UI as a Starlette app: one route per page, each also under ``/api`` as JSON."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from conveyor._version import __version__
from conveyor.errors import ConveyorError
from conveyor.metrics import CONTENT_TYPE
from conveyor.web.data import WebData
from conveyor.web.ui.charts import bar_chart, line_chart
from conveyor.web.ui.views import NotFound, Page, Views

if TYPE_CHECKING:
    from conveyor.app import App

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


def create_asgi(app: App, data: WebData) -> Starlette:
    """The UI of ``app``, reading ``data`` (started at the first request)."""
    views = Views(app, data)
    environment = _environment()

    def html(
        request: Request, template: str, page: Page, active: str, status: int = 200
    ) -> Response:
        context = {"client_id": app.settings.client_id, **page.data, "title": page.title,
                   "active": active, "base": request.scope.get("root_path", ""), "request": request}  # fmt: skip
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

    def metrics(request: Request) -> Response:
        """The app's Prometheus metrics, when this process has them enabled."""
        if not app.metrics.enabled:
            return Response(
                "metrics are not enabled in this process: call app.metrics.enable()\n",
                status_code=404,
                media_type="text/plain",
            )
        return Response(app.metrics.exposition(), media_type=CONTENT_TYPE)

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

    starlette = Starlette(
        routes=routes,
        exception_handlers={
            NotFound: not_found,
            HTTPException: http_error,
            ConveyorError: kafka_error,
        },
    )
    starlette.state.views = views
    return starlette
