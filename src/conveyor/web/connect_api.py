"""Kafka Connect's REST API behind Conveyor's access rules: a connect worker's, signed in with
HTTP Basic (``$CONVEYOR_CONNECT_PASSWORD_HASH``), and the web UI's, mounted under
``/connect`` with the UI's sign-in, read-only mode and policy."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from conveyor.connect.runtime.connect_cluster import ConnectCluster, ConnectError
from conveyor.connect.runtime.rest import Gate, create_rest_app
from conveyor.errors import ConveyorError
from conveyor.web.access import BasicLogin, SignInRefused
from conveyor.web.ui.guard import Guard

__all__ = ["UiConnectApi", "password_gate"]


def password_gate(login: BasicLogin) -> Gate:
    """A worker's gate: every call, reads included, signs in with ``Authorization: Basic``
    (401 without it or with wrong credentials, 429 after ten failures a minute)."""

    async def gate(request: Request, action: str | None, target: str) -> None:
        client = request.client.host if request.client else "?"
        header = request.headers.get("authorization")
        try:
            await run_in_threadpool(login.sign_in, header, client)
        except SignInRefused as refused:
            raise ConnectError(refused.status, refused.message) from None

    return gate


async def _ui_gate(request: Request, action: str | None, target: str) -> None:
    """The UI's gate: its middleware let the caller in (signed in, or an open UI); a change is
    an action of the UI, authorized as every other (the CSRF token of a browser's session,
    read-only mode, the policy with ``action`` and ``target``)."""
    if action is None:
        return
    try:
        await Guard.of(request).authorize(request, action, target, {})
    except HTTPException as error:
        raise ConnectError(error.status_code, str(error.detail)) from None


class UiConnectApi:
    """The REST API of the connect cluster the web UI shows, as an ASGI app for the UI's
    ``/connect`` mount; ``cluster()`` gives the cluster (it raises while no worker ever ran:
    answered 503 until one has)."""

    def __init__(self, cluster: Callable[[], ConnectCluster]) -> None:
        self._cluster = cluster
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()

    def _made(self) -> ASGIApp:
        with self._lock:
            if self._app is None:
                self._app = create_rest_app(self._cluster(), _ui_gate)
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app: Any = self._app
        if app is None:
            try:
                app = await run_in_threadpool(self._made)
            except ConveyorError as error:
                message = f"No connect cluster to serve: {error}"
                answer = JSONResponse({"error_code": 503, "message": message}, status_code=503)
                await answer(scope, receive, send)
                return
        await app(scope, receive, send)
