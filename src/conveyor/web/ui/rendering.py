"""What every handler of the web UI shares (:class:`Ui`): the app's web side, the views that
build pages, the Jinja environment, the guard; and how a page is answered (HTML, or JSON
under ``/api``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from conveyor._version import __version__
from conveyor.errors import ConfigurationError
from conveyor.web.access import Access
from conveyor.web.reading.data import WebData
from conveyor.web.reading.explorer import Explorer
from conveyor.web.ui.charts import bar_chart, line_chart
from conveyor.web.ui.connect_views import ConnectViews
from conveyor.web.ui.explorer_views import ExplorerViews
from conveyor.web.ui.guard import CSRF_FIELD, Guard
from conveyor.web.ui.schedule_views import ScheduleViews
from conveyor.web.ui.store_views import StoreViews
from conveyor.web.ui.views import NotFound, Page, Views

if TYPE_CHECKING:
    from conveyor.web.ui.host import UiHost

__all__ = ["NAVIGATION", "Ui", "environment", "whole"]

_NOTHING = "\u2013"  # an en dash: shown for a missing value

NAVIGATION = (
    ("dashboard", "Dashboard", ""),
    ("processes", "Processes", "/processes"),
    ("batches", "Batches", "/batches"),
    ("background_jobs", "Background jobs", "/background-jobs"),
    ("schedules", "Schedules", "/schedules"),
    ("stores", "Stores", "/stores"),
    ("connectors", "Connectors", "/connectors"),
    ("routing", "Routing", "/routing"),
    ("lags", "Lags", "/lags"),
    ("errors", "Errors", "/errors"),
    ("topics", "Topics", "/topics"),
    ("explorer", "Explorer", "/explorer"),
    ("dlq", "DLQ", "/dlq"),
    ("cluster", "Cluster", "/cluster"),
    ("status", "Status", "/status"),
)


class Ui:
    """The UI of ``web`` (an app's ``app.web``), reading ``data``, behind ``access``."""

    def __init__(self, web: UiHost, data: WebData, access: Access | None = None) -> None:
        self.web = web
        self.app = web.app
        self.data = data
        self.views = Views(web, data)
        views = self.views
        self.explorer = ExplorerViews(
            self.app, lambda: views.admin, Explorer(self.app.settings.kafka)
        )
        self.schedules = ScheduleViews(self.app)
        self.stores = StoreViews(self.app, data, lambda: views.admin)
        self.connectors = ConnectViews(self.app.settings.kafka, web.connect_group)
        self.environment = environment()
        self.guard = Guard(access or Access())

    def html(
        self, request: Request, template: str, page: Page, active: str, status: int = 200
    ) -> Response:
        guard = self.guard
        context = {
            "client_id": self.app.settings.client_id,
            **page.data,
            "title": page.title,
            "active": active,
            "base": request.scope.get("root_path", ""),
            "request": request,
            "csrf_field": CSRF_FIELD,
            "csrf_token": guard.session(request).csrf,
            "user": guard.user(request),
            "login": guard.access.login,
            "read_only": guard.access.read_only,
            "can": lambda action, target="": guard.can(request, action, target),
        }
        body = self.environment.get_template(template).render(context)
        return HTMLResponse(body, status_code=status)

    def answer(
        self,
        request: Request,
        as_json: bool,
        title: str,
        result: dict[str, Any],
        template: str,
        active: str,
        status: int = 200,
    ) -> Response:
        """An action's result: JSON to an API call, else a page."""
        if as_json:
            return JSONResponse(result, status_code=status)
        return self.html(request, template, Page(title, {"result": result}), active, status)

    def detail(
        self,
        name: str,
        template: str,
        path: str,
        build: Callable[[Request], Page],
        active: str,
        api_path: str | None = None,
    ) -> tuple[Route, Route]:
        """A page at ``path`` as HTML, and its data as JSON at ``/api{path}``."""
        data = self.data

        def as_html(request: Request) -> Response:
            data.wait_ready(3.0)
            return self.html(request, template, build(request), active)

        def as_json(request: Request) -> Response:
            data.wait_ready(3.0)
            built = build(request)
            return JSONResponse({"title": built.title, **built.data})

        return Route(path, as_html, name=name), Route(
            api_path or f"/api{path}", as_json, name=f"api_{name}"
        )

    def page(
        self, name: str, template: str, build: Callable[[Request], Page]
    ) -> tuple[Route, Route]:
        """A page of the navigation (the dashboard's JSON is /api/dashboard)."""
        path = next(p for n, _, p in NAVIGATION if n == name)
        return self.detail(name, template, path or "/", build, name, f"/api{path or '/dashboard'}")


def number(request: Request, name: str, default: int = 1) -> int:
    """A page number (1 or more) from the query; ``default`` when it is not one."""
    try:
        return max(1, int(request.query_params.get(name, default)))
    except ValueError:
        return default


def whole(request: Request, name: str, default: int, low: int = 0, high: int | None = None) -> int:
    """A whole number from the query, or a ConfigurationError naming it (a 400)."""
    text = request.query_params.get(name)
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, not {text!r}", name) from None
    if value < low or (high is not None and value > high):
        raise ConfigurationError(
            f"{name} must be {low} to {high}, not {value}"
            if high is not None
            else f"{name} must be {low} or more, not {value}",
            name,
        )
    return value


def broker(request: Request) -> int | None:
    """The ``broker`` of the query (``None``: none asked for); not a number is a 404."""
    value = request.query_params.get("broker")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise NotFound("broker", value) from None


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(f"{request.scope.get('root_path', '')}/api")


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


def environment() -> Environment:
    """The UI's Jinja environment: its templates, filters (ts, bytes, duration, percent,
    number) and globals (charts, navigation, version)."""
    found = Environment(
        undefined=StrictUndefined,
        loader=PackageLoader("conveyor.web.ui", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    found.filters.update(
        ts=_timestamp,
        bytes=_bytes,
        duration=_duration,
        percent=lambda v: f"{100 * float(v or 0):.0f} %",
        number=lambda v: (
            _NOTHING if v is None else f"{v:,}" if isinstance(v, int) else f"{float(v):,.2f}"
        ),
    )
    found.globals.update(
        line_chart=lambda *a, **k: Markup(line_chart(*a, **k)),
        bar_chart=lambda *a, **k: Markup(bar_chart(*a, **k)),
        navigation=NAVIGATION,
        version=__version__,
    )
    return found
