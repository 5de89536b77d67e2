"""The UI's gate: every request gets a session (a signed cookie holding the CSRF token and,
once signed in, the user); a closed UI sends visitors who are not signed in to the login
page (or answers 401 under ``/api``); every action checks read-only mode, the policy and the
CSRF token before it runs."""

from __future__ import annotations

import hmac
import logging
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.web.access import Access, Session, Sessions, verify_password

__all__ = ["Guard", "form_of", "safe_next"]

_log = logging.getLogger("conveyor.web.access")

_OPEN_PATHS = ("/login", "/static/")
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"


class Guard:
    """Applies :class:`Access` to the UI: :meth:`middleware` wraps the ASGI app;
    :meth:`authorize` is awaited by every action's endpoint."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self.sessions = Sessions(access.secret)

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
            user = session.user if guard.access.login else None
            if guard.access.authenticate is not None:
                try:
                    user = guard.access.authenticate(request)
                except Exception:  # a failing host check signs nobody in
                    _log.exception("the host app's authenticate() failed")
                    user = None
            state = scope.setdefault("state", {})
            state["session"] = session
            state["user"] = user
            state["guard"] = guard
            path = scope.get("path", "")[len(scope.get("root_path", "")) :] or "/"
            if guard.access.closed and user is None and not path.startswith(_OPEN_PATHS):
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

    def _sign_in_first(self, request: Request, path: str) -> Response:
        base = request.scope.get("root_path", "")
        if path.startswith("/api"):
            return JSONResponse({"error": "sign in first"}, status_code=401)
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
        token = request.headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
        expected = self.session(request).csrf
        if not isinstance(token, str) or not _same(token, expected):
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
        password: the form again, with the reason)."""
        form = await form_of(request)
        token = form.get(CSRF_FIELD)
        if not isinstance(token, str) or not _same(token, self.session(request).csrf):
            raise HTTPException(403, "The login form expired: reload the page and try again.")
        password = form.get("password")
        assert self.access.password_hash is not None
        if not isinstance(password, str) or not verify_password(
            password, self.access.password_hash
        ):
            _log.warning("a failed login from %s", request.client.host if request.client else "?")
            return None
        session = Session.new(self.access.user, self.access.session_seconds)
        response = RedirectResponse(safe_next(request, next_path), status_code=303)
        self.set_cookie(response, request, session)
        _log.info("%s signed in", self.access.user)
        return response

    def logout(self, request: Request) -> Response:
        base = request.scope.get("root_path", "")
        response = RedirectResponse(f"{base}/login" if self.access.login else f"{base}/", 303)
        self.set_cookie(response, request, Session.new(None, self.access.session_seconds))
        return response


_MAX_FORM = 1024 * 1024


async def form_of(request: Request) -> FormData:
    """An URL-encoded form's fields (the UI posts no files; anything else reads as empty).
    Read once: later calls return the same fields."""
    cached = request.scope.get("conveyor.form")
    if isinstance(cached, FormData):
        return cached
    fields: list[tuple[str, str | UploadFile]] = []
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        body = await request.body()
        if len(body) > _MAX_FORM:
            raise HTTPException(413, "The form is too large.")
        fields = list(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    form = FormData(fields)
    request.scope["conveyor.form"] = form
    return form


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def safe_next(request: Request, next_path: str) -> str:
    """Where to go after signing in: a path of this UI (never another site)."""
    base = request.scope.get("root_path", "")
    if not next_path.startswith("/") or next_path.startswith("//") or "\\" in next_path:
        return f"{base}/"
    return f"{base}{next_path}"
