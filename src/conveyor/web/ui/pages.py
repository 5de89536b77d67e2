"""The web UI's pages: what each builds from the request (its :class:`Page`), and the
explorer's few handlers that answer otherwise (its home's redirect, the export, metrics)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from conveyor.metrics import CONTENT_TYPE
from conveyor.web.reading.explorer_query import Filters, Start
from conveyor.web.ui.rendering import broker, number, whole
from conveyor.web.ui.views import Page

if TYPE_CHECKING:
    from conveyor.web.ui.rendering import Ui

__all__ = ["MOVED", "ExplorerPages", "Pages", "offset_params"]

MOVED = {"/jobs": "/batches", "/api/jobs": "/api/batches"}
"""Pages that moved: the old path, the new one (the engine's "Jobs" are "Batches" now, apart
from the background jobs)."""


class Pages:
    """The pages of the navigation and their details."""

    def __init__(self, ui: Ui) -> None:
        self.views = ui.views
        self.schedules_views = ui.schedules
        self.store_views = ui.stores
        self.connect_views = ui.connectors

    def dashboard(self, request: Request) -> Page:
        return self.views.dashboard(request.query_params.get("range", "1h"))

    def processes(self, request: Request) -> Page:
        return self.views.processes(number(request, "page"))

    def process(self, request: Request) -> Page:
        return self.views.process(request.path_params["process_id"])

    def batches(self, request: Request) -> Page:
        return self.views.batches()

    def background_jobs(self, request: Request) -> Page:
        return self.views.background_jobs()

    def moved(self, request: Request) -> Response:
        """An old address of a page (``/jobs``, now ``/batches``): redirected, with its query."""
        base = request.scope.get("root_path", "")
        path = request.url.path.removeprefix(base)
        target = f"{base}{MOVED[path]}" + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(target, status_code=301)

    def schedules(self, request: Request) -> Page:
        query = request.query_params
        return self.schedules_views.page(query.get("topic") or None, number(request, "page"))

    def stores(self, request: Request) -> Page:
        query = request.query_params
        return self.store_views.page(query.get("store") or None, query.get("key"))

    def connectors(self, request: Request) -> Page:
        return self.connect_views.page()

    def routing(self, request: Request) -> Page:
        return self.views.routing()

    def asyncapi(self, request: Request) -> Page:
        return self.views.asyncapi()

    def asyncapi_document(self, request: Request) -> Response:
        """The raw AsyncAPI document (JSON), as tools read it."""
        return JSONResponse(self.views.asyncapi().data["document"])

    def lags(self, request: Request) -> Page:
        return self.views.lags()

    def errors(self, request: Request) -> Page:
        query = request.query_params
        wanted = {k: query[k] for k in ("type", "topic", "process", "q") if query.get(k)}
        return self.views.errors(wanted, number(request, "page"))

    def error(self, request: Request) -> Page:
        return self.views.error(request.path_params["error_id"])

    def topics(self, request: Request) -> Page:
        return self.views.topics(
            number(request, "page"), request.query_params.get("internal") == "1"
        )

    def topic(self, request: Request) -> Page:
        return self.views.topic(request.path_params["name"])

    def cluster(self, request: Request) -> Page:
        return self.views.cluster(broker(request), request.query_params.get("all") == "1")

    def status(self, request: Request) -> Page:
        return self.views.status()


def offset_params(request: Request) -> tuple[str, int, int]:
    """The topic, partition and offset of a message's path."""
    params = request.path_params
    return params["topic"], int(params["partition"]), int(params["offset"])


def _read_request(request: Request) -> tuple[Start, Filters]:
    query = request.query_params
    start = Start.parse(query.get("offset"), query.get("time"), query.get("newest"))
    return start, Filters.parse(dict(query))


class ExplorerPages:
    """The explorer's and the dead letter queues' pages."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.explorer = ui.explorer

    def home(self, request: Request) -> Response:
        """The explorer's first page; its topic form lands here and goes on to the topic."""
        topic = request.query_params.get("topic", "").strip()
        if topic:
            base = request.scope.get("root_path", "")
            return RedirectResponse(f"{base}/explorer/{quote(topic, safe='')}", status_code=303)
        return self.ui.html(request, "explorer.html", self.explorer.index(), "explorer")

    def index(self, request: Request) -> Page:
        return self.explorer.index()

    def topic(self, request: Request) -> Page:
        start, filters = _read_request(request)
        return self.explorer.topic(
            request.path_params["topic"],
            whole(request, "partition", 0),
            start,
            filters,
            whole(request, "limit", 50, 1, 1000),
        )

    def message(self, request: Request) -> Page:
        return self.explorer.message(*offset_params(request))

    def dlqs(self, request: Request) -> Page:
        return self.explorer.dlqs()

    def dlq(self, request: Request) -> Page:
        return self.explorer.dlq(request.path_params["topic"])

    def redrive(self, request: Request) -> Page:
        return self.explorer.redrive_page(
            request.path_params["topic"], request.path_params["job_id"]
        )

    def export(self, request: Request) -> Response:
        start, filters = _read_request(request)
        topic = request.path_params["topic"]
        partition = request.query_params.get("partition")
        chosen = None if partition in (None, "", "all") else [whole(request, "partition", 0)]
        lines = self.explorer.explorer.export(
            topic, chosen, start, filters, whole(request, "limit", 1000, 1, 100_000)
        )
        filename = "".join(c if c.isalnum() or c in "-_." else "_" for c in topic)
        return StreamingResponse(
            lines,
            media_type="application/x-ndjson",
            headers={"content-disposition": f'attachment; filename="{filename}.jsonl"'},
        )


def metrics(ui: Ui, request: Request) -> Response:
    """The app's Prometheus metrics, when this process has them enabled."""
    found = ui.web.metrics
    if found is None or not found.enabled:
        return Response(
            "metrics are not enabled in this process: call app.metrics.enable()\n",
            status_code=404,
            media_type="text/plain",
        )
    return Response(found.exposition(), media_type=CONTENT_TYPE)
