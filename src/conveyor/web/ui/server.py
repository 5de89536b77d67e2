"""The web UI as a Starlette app: one table of routes (each page also under ``/api`` as
JSON; the actions behind :class:`~conveyor.web.ui.guard.Guard`). The handlers live by side:
pages (``pages.py``), actions (``actions.py``), signing in (``auth.py``), failures
(``failures.py``); what they share in ``rendering.py``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from conveyor.web.access import Access
from conveyor.web.connect_api import UiConnectApi
from conveyor.web.reading.data import WebData
from conveyor.web.ui.actions import Actions
from conveyor.web.ui.auth import SignIn
from conveyor.web.ui.failures import exception_handlers
from conveyor.web.ui.pages import MOVED, ExplorerPages, Pages, metrics
from conveyor.web.ui.rendering import NAVIGATION, Ui

if TYPE_CHECKING:
    from conveyor.web.ui.host import UiHost

__all__ = ["NAVIGATION", "create_asgi", "routes"]

_MESSAGE = "/{topic}/{partition:int}/{offset:int}"


def routes(ui: Ui) -> list[BaseRoute]:
    """Every route of the UI."""
    pages, explorer, actions, sign_in = Pages(ui), ExplorerPages(ui), Actions(ui), SignIn(ui)
    page, detail = ui.page, ui.detail
    return [
        *page("dashboard", "dashboard.html", pages.dashboard),
        *page("processes", "processes.html", pages.processes),
        *detail("process", "process.html", "/processes/{process_id:path}", pages.process, "processes"),
        *page("batches", "batches.html", pages.batches),
        *page("background_jobs", "background_jobs.html", pages.background_jobs),
        *(Route(old, pages.moved) for old in MOVED),
        *page("schedules", "schedules.html", pages.schedules),
        *page("stores", "stores.html", pages.stores),
        *page("connectors", "connectors.html", pages.connectors),
        *page("routing", "routing.html", pages.routing),
        Route("/asyncapi", lambda request: ui.html(request, "asyncapi.html", pages.asyncapi(request), "routing"), name="asyncapi"),
        Route("/api/asyncapi", pages.asyncapi_document, name="api_asyncapi"),
        *page("lags", "lags.html", pages.lags),
        *page("errors", "errors.html", pages.errors),
        *detail("error", "error.html", "/errors/{error_id}", pages.error, "errors"),
        *page("topics", "topics.html", pages.topics),
        *detail("topic", "topic.html", "/topics/{name}", pages.topic, "topics"),
        *page("cluster", "cluster.html", pages.cluster),
        *page("status", "status.html", pages.status),
        Route("/explorer", explorer.home, name="explorer_home"),
        *page("explorer", "explorer.html", explorer.index),
        *detail("explorer_topic", "explorer_topic.html", "/explorer/{topic}", explorer.topic, "explorer"),
        *detail("explorer_message", "explorer_message.html", f"/explorer{_MESSAGE}", explorer.message, "explorer"),
        *page("dlq", "dlqs.html", explorer.dlqs),
        *detail("dlq_topic", "dlq.html", "/dlq/{topic}", explorer.dlq, "dlq"),
        *detail("redrive", "redrive.html", "/dlq/{topic}/redrives/{job_id}", explorer.redrive, "dlq"),
        Route("/explorer/{topic}/export", explorer.export, name="export"),
        Route(f"/explorer{_MESSAGE}/republish", actions.republish, methods=["POST"]),
        Route(f"/api/explorer{_MESSAGE}/republish", actions.republish, methods=["POST"]),
        Route("/dlq/{topic}/redrive", actions.redrive, methods=["POST"]),
        Route("/api/dlq/{topic}/redrive", actions.redrive, methods=["POST"]),
        Route("/dlq/{topic}/discard", actions.discard, methods=["POST"]),
        Route("/api/dlq/{topic}/discard", actions.discard, methods=["POST"]),
        Route("/schedules/{schedule_id:path}/cancel", actions.cancel_schedule, methods=["POST"]),
        Route("/api/schedules/{schedule_id:path}/cancel", actions.cancel_schedule, methods=["POST"]),
        Route("/schedules/tasks/{action}", actions.task, methods=["POST"]),
        Route("/api/schedules/tasks/{action}", actions.task, methods=["POST"]),
        Route("/connectors/{name}/{action}", actions.connector, methods=["POST"]),
        Route("/api/connectors/{name}/{action}", actions.connector, methods=["POST"]),
        Route("/processes/commands", actions.command, methods=["POST"]),  # with process=*
        Route("/processes/{process_id:path}/commands", actions.command, methods=["POST"]),
        Route("/api/commands", actions.command, methods=["POST"]),
        Mount("/connect", app=UiConnectApi(ui.connectors.cluster), name="connect"),
        Route("/login", sign_in.login, methods=["GET", "POST"]),
        Route("/logout", sign_in.logout, methods=["POST"]),
        Route("/metrics", lambda request: metrics(ui, request), name="metrics"),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]  # fmt: skip


def create_asgi(web: UiHost, data: WebData, access: Access | None = None) -> Any:
    """The UI of ``web`` (an app's ``app.web``), reading ``data`` (started at the first
    request), behind ``access`` (an open UI when ``None``)."""
    ui = Ui(web, data, access)
    starlette = Starlette(routes=routes(ui), exception_handlers=exception_handlers(ui))
    starlette.state.views = ui.views
    starlette.state.explorer = ui.explorer
    starlette.state.guard = ui.guard
    return ui.guard.middleware(starlette)
