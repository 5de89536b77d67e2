"""What the web UI answers when a page or an action fails: 404 (nothing there), the HTTP
error raised, 400 (a bad setting or field, named), 504 (Kafka did not answer in time: a read
or request timed out, which says nothing of whether what it looked for is there), 503
(another Kafka error)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from conveyor.errors import ConfigurationError, ConveyorError, KafkaError
from conveyor.web.ui.rendering import wants_json
from conveyor.web.ui.views import NotFound, Page

if TYPE_CHECKING:
    from conveyor.web.ui.rendering import Ui

__all__ = ["exception_handlers", "timed_out"]

_log = logging.getLogger("conveyor.web")

Handler = Callable[[Request, Exception], Awaitable[Response]]
_TIMEOUTS = frozenset({"_TIMED_OUT", "_MSG_TIMED_OUT", "REQUEST_TIMED_OUT", "_TIMED_OUT_QUEUE"})
"""librdkafka's names of the errors that say a request ran out of time."""


def timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` says Kafka did not answer in time (a deadline, not a refusal)."""
    return isinstance(exc, TimeoutError) or (isinstance(exc, KafkaError) and exc.name in _TIMEOUTS)


def exception_handlers(ui: Ui) -> dict[Any, Handler]:
    """Starlette's exception handlers for the UI's pages and actions."""

    def failed(request: Request, title: str, message: str, code: int, **extra: Any) -> Response:
        if wants_json(request):
            return JSONResponse({"error": message, **extra}, status_code=code)
        return ui.html(
            request, "message.html", Page(title, {"message": message, "code": code}), "", code
        )

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
        if timed_out(exc):
            return failed(
                request, "Timed out", f"Kafka did not answer in time: {exc}", 504, timed_out=True
            )
        return failed(request, "Kafka unavailable", f"Kafka did not answer: {exc}", 503)

    async def bad_input(request: Request, exc: Exception) -> Response:
        return failed(request, "Bad request", str(exc), 400, setting=getattr(exc, "setting", None))

    return {
        NotFound: not_found,
        HTTPException: http_error,
        ConfigurationError: bad_input,
        ConveyorError: kafka_error,
    }
