"""The UI's gate: every request gets a session (a signed cookie holding the CSRF token and,
once signed in, the user); a closed UI sends visitors who are not signed in to the login
page (or answers 401 under ``/api``); every action checks read-only mode, the policy and the
CSRF token before it runs."""

from __future__ import annotations

import hmac
import inspect
import logging
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.web.access import (
    Access,
    Attempts,
    BasicLogin,
    Session,
    Sessions,
    SignInRefused,
    verify_password,
)

__all__ = ["Guard", "body_of", "form_of", "is_open", "route_path", "safe_next", "same_token"]

_log = logging.getLogger("conveyor.web.access")

_OPEN_EXACT = frozenset({"/login", "/metrics"})
_OPEN_PREFIX = "/static/"


def route_path(scope: Scope) -> str:
    """The path inside the UI: without the ``root_path`` it is mounted under, when the server
    put that in front (as Starlette's own routing reads it)."""
    path: str = scope.get("path", "") or "/"
    root: str = scope.get("root_path", "") or ""
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return path or "/"


def is_open(path: str) -> bool:
    """Pages anyone may see on a closed UI: the login page, the static files and the
    Prometheus metrics (which hold no secrets and are scraped without a session)."""
    return path in _OPEN_EXACT or path.startswith(_OPEN_PREFIX)


CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"


class Guard:
    """Applies :class:`Access` to the UI: :meth:`middleware` wraps the ASGI app;
    :meth:`authorize` is awaited by every action's endpoint."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self.sessions = Sessions(access.secret, access.session_idle_seconds)
        self._attempts = Attempts()
        self.basic = (
            BasicLogin(access.user, access.password_hash, attempts=self._attempts)
            if access.password_hash
            else None
        )  # the login form's failures and the header's count against one limit

    # -- every request ------------------------------------------------------------------------

    def middleware(self, app: ASGIApp) -> ASGIApp:
        guard = self

        async def gate(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            request = Request(scope)
            session = guard.sessions.load(request.cookies.get(Sessions.COOKIE))
            fresh = session is None
            if session is None:
                session = Session.new(None, guard.access.session_seconds)
            else:  # in use: its idle time starts again (a new cookie now and then)
                touched = guard.sessions.touched(session)
                if touched is not None:
                    session, fresh = touched, True
            user = session.user if guard.access.login else None
            header = request.headers.get("authorization")
            by_header = header is not None and guard.basic is not None
            if by_header:
                assert header is not None
                refused = await guard._basic_user(request, header)
                if isinstance(refused, Response):
                    await refused(scope, receive, send)
                    return
                user = refused
            elif guard.access.authenticate is not None:
                user = await guard._host_user(request)
                if user != session.user:  # a new session (and CSRF token) for whoever it is now
                    session, fresh = Session.new(user, guard.access.session_seconds), True
            state = scope.setdefault("state", {})
            state["session"] = session
            state["user"] = user
            state["guard"] = guard
            state["by_header"] = by_header
            path = route_path(scope)
            if guard.access.closed and user is None and not is_open(path):
                response = guard._sign_in_first(request, path)
                if fresh:
                    guard.set_cookie(response, request, session)
                await response(scope, receive, send)
                return
            if not fresh:
                await app(scope, receive, send)
                return
            cookie = guard.cookie_header(request, session)

            async def send_with_cookie(message: Message) -> None:
                if message["type"] == "http.response.start":
                    headers = list(message.get("headers", []))
                    headers.append((b"set-cookie", cookie.encode("latin-1")))
                    message = {**message, "headers": headers}
                await send(message)

            await app(scope, receive, send_with_cookie)

        return gate

    async def _basic_user(self, request: Request, header: str) -> str | Response:
        """The user an ``Authorization: Basic`` header signs in (a REST client or a script, with
        every call), or the answer refusing it: 401 for wrong credentials, 429 after too many.
        No ``WWW-Authenticate`` challenge: a browser then never keeps the password to send by
        itself (which would let other sites' pages act with it)."""
        assert self.basic is not None
        client = request.client.host if request.client else "?"
        try:
            return await run_in_threadpool(self.basic.sign_in, header, client)
        except SignInRefused as refused:
            _log.warning("a refused sign-in (Authorization header) from %s", client)
            return _refusal(request, refused.status, refused.message)

    async def _host_user(self, request: Request) -> str | None:
        """The host app's signed-in user (its ``authenticate`` may be a coroutine function)."""
        assert self.access.authenticate is not None
        try:
            user = self.access.authenticate(request)
            if inspect.isawaitable(user):
                user = await user
        except Exception:  # a failing host check signs nobody in
            _log.exception("the host app's authenticate() failed")
            return None
        if user is not None and not isinstance(user, str):
            _log.error("authenticate() must return a user name or None, not %r", type(user))
            return None
        return user or None

    def _sign_in_first(self, request: Request, path: str) -> Response:
        base = request.scope.get("root_path", "")
        if path.startswith("/api") or _connect_api(path):
            return _refusal(request, 401, "sign in first")
        if self.access.authenticate is not None:  # the host app signs people in, not this UI
            return Response("Sign in to the application this UI is part of.", status_code=401)
        target = path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"{base}/login?next={quote(target)}", status_code=303)

    # -- cookies ------------------------------------------------------------------------------

    def cookie_header(self, request: Request, session: Session) -> str:
        cookie: SimpleCookie = SimpleCookie()
        cookie[Sessions.COOKIE] = self.sessions.dump(session)
        morsel = cookie[Sessions.COOKIE]
        morsel["path"] = request.scope.get("root_path", "") or "/"
        morsel["httponly"] = True
        morsel["samesite"] = "Lax"
        morsel["max-age"] = str(int(self.access.session_seconds))
        if request.url.scheme == "https":
            morsel["secure"] = True
        return morsel.OutputString()

    def set_cookie(self, response: Response, request: Request, session: Session) -> None:
        response.raw_headers.append(
            (b"set-cookie", self.cookie_header(request, session).encode("latin-1"))
        )

    # -- actions ------------------------------------------------------------------------------

    @staticmethod
    def of(request: Request) -> Guard:
        guard: Guard = request.state.guard
        return guard

    @staticmethod
    def session(request: Request) -> Session:
        session: Session = request.state.session
        return session

    @staticmethod
    def user(request: Request) -> str | None:
        user: str | None = request.state.user
        return user

    def can(self, request: Request, action: str, target: str = "") -> bool:
        """Whether the page should offer ``action`` (read-only and the policy)."""
        return self.access.allows(self.user(request), action, target)

    async def authorize(
        self, request: Request, action: str, target: str, body: dict[str, Any] | None = None
    ) -> FormData | dict[str, Any]:
        """Check an action before it runs and return its form (or ``body``, a JSON request's
        fields): read-only mode and the policy refuse with 403, and so does a missing or
        wrong CSRF token (the ``csrf_token`` field or the ``X-CSRF-Token`` header)."""
        fields: FormData | dict[str, Any] = body if body is not None else await form_of(request)
        # a browser's session must echo the page's token; an Authorization header, which a
        # browser never adds by itself, needs none
        if not request.state.by_header:
            token = request.headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
            expected = self.session(request).csrf
            if not isinstance(token, str) or not same_token(token, expected):
                _log.warning("refused %s on %s: no valid CSRF token", action, target)
                raise HTTPException(
                    403, "This action needs the page's CSRF token: reload the page and try again."
                )
        if self.access.read_only:
            _log.warning("refused %s on %s: the UI is read-only", action, target)
            raise HTTPException(403, "The web UI is read-only: actions are turned off.")
        user = self.user(request)
        if not self.access.allows(user, action, target):
            _log.warning("refused %s on %s for %s: the policy says no", action, target, user)
            raise HTTPException(403, f"You may not {action} {target}.")
        _log.info("%s: %s on %s", user or "anonymous", action, target)
        return fields

    # -- logging in ---------------------------------------------------------------------------

    async def login(self, request: Request, next_path: str) -> Response | None:
        """Check a login form; the response that signs the user in, or ``None`` (wrong
        password: the form again, with the reason). A client with too many failed attempts
        in a minute is refused (429) before its password is even hashed."""
        form = await form_of(request)
        token = form.get(CSRF_FIELD)
        if not isinstance(token, str) or not same_token(token, self.session(request).csrf):
            raise HTTPException(403, "The login form expired: reload the page and try again.")
        client = request.client.host if request.client else "?"
        if not self._attempts.allowed(client):
            raise HTTPException(429, "Too many failed sign-ins: wait a minute and try again.")
        password = form.get("password")
        assert self.access.password_hash is not None
        hashed = self.access.password_hash
        right = isinstance(password, str) and await run_in_threadpool(
            verify_password, password, hashed
        )  # scrypt takes tens of ms: not on the event loop
        if not right:
            self._attempts.failed(client)
            _log.warning("a failed sign-in from %s", client)
            return None
        session = Session.new(self.access.user, self.access.session_seconds)
        response = RedirectResponse(safe_next(request, next_path), status_code=303)
        self.set_cookie(response, request, session)
        _log.info("%s signed in from %s", self.access.user, client)
        return response

    def logout(self, request: Request) -> Response:
        self.sessions.revoke(self.session(request))  # a copy of its cookie is refused now
        base = request.scope.get("root_path", "")
        response = RedirectResponse(f"{base}/login" if self.access.login else f"{base}/", 303)
        self.set_cookie(response, request, Session.new(None, self.access.session_seconds))
        return response


_MAX_FORM = 1024 * 1024


async def body_of(request: Request, limit: int = _MAX_FORM) -> bytes:
    """The request's body, refused (413) as soon as it passes ``limit`` bytes."""
    cached = request.scope.get("conveyor.body")
    if isinstance(cached, bytes):
        return cached
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, "The request is too large.")
        chunks.append(chunk)
    body = b"".join(chunks)
    request.scope["conveyor.body"] = body
    return body


async def form_of(request: Request) -> FormData:
    """An URL-encoded form's fields (the UI posts no files; anything else reads as empty).
    Read once: later calls return the same fields."""
    cached = request.scope.get("conveyor.form")
    if isinstance(cached, FormData):
        return cached
    fields: list[tuple[str, str | UploadFile]] = []
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        body = await body_of(request)
        fields = list(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    form = FormData(fields)
    request.scope["conveyor.form"] = form
    return form


def _connect_api(path: str) -> bool:
    """Whether ``path`` is Kafka Connect's REST API (mounted at ``/connect``)."""
    return path == "/connect" or path.startswith("/connect/")


def _refusal(request: Request, status: int, message: str) -> Response:
    """A refused API call's answer: Kafka Connect's error shape under ``/connect``."""
    if _connect_api(route_path(request.scope)):
        return JSONResponse({"error_code": status, "message": message}, status_code=status)
    return JSONResponse({"error": message}, status_code=status)


def same_token(given: str, expected: str) -> bool:
    """Whether a submitted token is the session's (in constant time)."""
    return hmac.compare_digest(given.encode(), expected.encode())


def safe_next(request: Request, next_path: str) -> str:
    """Where to go after signing in: a path of this UI (never another site)."""
    base = request.scope.get("root_path", "")
    if not next_path.startswith("/") or next_path.startswith("//") or "\\" in next_path:
        return f"{base}/"
    return f"{base}{next_path}"
