"""Signing in and out of the web UI (see :class:`~conveyor.web.ui.guard.Guard`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from conveyor.web.ui.guard import CSRF_FIELD, form_of, safe_next, same_token
from conveyor.web.ui.views import Page

if TYPE_CHECKING:
    from conveyor.web.ui.rendering import Ui

__all__ = ["SignIn"]


class SignIn:
    """The login page and the logout action."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.guard = ui.guard

    async def login(self, request: Request) -> Response:
        guard, html = self.guard, self.ui.html
        next_path = request.query_params.get("next", "/")
        if not guard.access.login:
            reason = (
                "Sign in to the application this UI is part of."
                if guard.access.authenticate
                else "This UI asks nobody to sign in (see app.web.protect)."
            )
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
        return html(
            request,
            "login.html",
            Page("Sign in", {"next": next_path, "problem": problem}),
            "",
            401 if problem else 200,
        )

    async def logout(self, request: Request) -> Response:
        form = await form_of(request)
        token = form.get(CSRF_FIELD)
        if not isinstance(token, str) or not same_token(token, self.guard.session(request).csrf):
            raise HTTPException(403, "The logout form expired: reload the page and try again.")
        return self.guard.logout(request)
