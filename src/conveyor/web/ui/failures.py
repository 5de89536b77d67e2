"""What the web UI answers when a page or an action fails: 404 (nothing there), the HTTP
error raised, 400 (a bad setting or field, named), 503 (Kafka did not answer)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.web.ui.rendering import wants_json
from conveyor.web.ui.views import NotFound, Page

if TYPE_CHECKING:
    from conveyor.web.ui.rendering import Ui

__all__ = ["exception_handlers"]

_log = logging.getLogger("conveyor.web")

Handler = Callable[[Request, Exception], Awaitable[Response]]


def exception_handlers(ui: Ui) -> dict[Any, Handler]:
    """Starlette's exception handlers for the UI's pages and actions."""

    def failed(request: Request, title: str, message: str, code: int, **extra: Any) -> Response:
        if wants_json(request):
            return JSONResponse({"error": message, **extra}, status_code=code)
        return ui.html(request, "message.html", Page(title, {"message": message, "code": code}), "", code)  # fmt: skip

    async def not_found(request: Request, exc: Exception) -> Response:
        message = str(exc) if isinstance(exc, NotFound) else f"no page at {request.url.path}"
        return failed(request, "Not found", message, 404)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return await not_found(request, exc)
        return failed(request, str(exc.detail), str(exc.detail), exc.status_code)

    async def kafka_error(request: Request, exc: Exception) -> Response:
        _log.warning("a page could not be built: %s", exc)
        return failed(request, "Kafka unavailable", f"Kafka did not answer: {exc}", 503)

    async def bad_input(request: Request, exc: Exception) -> Response:
        return failed(request, "Bad request", str(exc), 400, setting=getattr(exc, "setting", None))

    return {
        NotFound: not_found,
        HTTPException: http_error,
        ConfigurationError: bad_input,
        ConveyorError: kafka_error,
    }
