"""Who may do what, without a broker: passwords are hashed (never kept), session cookies are
signed and expire, a closed UI sends visitors to the login page (401 under /api), every
action needs the page's CSRF token, read-only mode hides and refuses actions, the policy is
asked with the user, the action and its target, and the host app's authentication counts
when the UI is mounted in one."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from conveyor import App
from conveyor.errors import ConfigurationError
from conveyor.web.access import Access, Session, Sessions, hash_password, verify_password

PASSWORD = "correct horse battery staple"
HASH = hash_password(PASSWORD)


def new_app() -> App:
    return App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:1"})


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert found, "every page carries its CSRF token"
    return found.group(1)


def test_a_password_hash_verifies_only_its_password_and_holds_no_plain_text() -> None:
    assert PASSWORD not in HASH
    assert HASH.startswith("scrypt$")
    assert verify_password(PASSWORD, HASH)
    assert not verify_password(PASSWORD + "!", HASH)
    assert hash_password(PASSWORD) != HASH, "salted: the same password hashes differently"
    with pytest.raises(ConfigurationError) as refused:
        Access(password_hash="plain-text-password")
    assert refused.value.setting == "password_hash"


def test_a_session_cookie_is_signed_and_expires() -> None:
    sessions = Sessions(b"k" * 32)
    session = Session.new("admin", 60)
    value = sessions.dump(session)
    assert sessions.load(value) == session
    body, _, signature = value.rpartition(".")
    forged = Sessions(b"x" * 32).dump(Session("root", session.csrf, session.expires))
    assert sessions.load(forged) is None, "signed with another key"
    assert sessions.load(body + "." + signature[::-1]) is None
    assert sessions.load("garbage") is None
    assert sessions.load(value, now=time.time() + 120) is None, "expired"


def test_a_closed_ui_asks_for_the_password_then_lets_the_user_in_and_out() -> None:
    app = new_app()
    app.web.protect(password_hash=HASH)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    away = client.get("/dlq?x=1")
    assert away.status_code == 303
    assert away.headers["location"] == "/login?next=/dlq%3Fx%3D1"
    assert client.get("/api/dlq").status_code == 401
    login = client.get("/login")
    assert login.status_code == 200
    token = csrf_of(login.text)

    wrong = client.post("/login", data={"password": "nope", "csrf_token": token})
    assert wrong.status_code == 401
    assert "Wrong password" in wrong.text
    no_token = client.post("/login", data={"password": PASSWORD})
    assert no_token.status_code == 403

    signed_in = client.post("/login?next=/status", data={"password": PASSWORD, "csrf_token": token})
    assert signed_in.status_code == 303
    assert signed_in.headers["location"] == "/status"
    cookie = signed_in.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie
    page = client.get("/login", follow_redirects=True)
    assert 'id="user">admin<' in page.text

    away = client.post("/logout", data={"csrf_token": csrf_of(page.text)})
    assert away.status_code == 303
    assert client.get("/dlq").status_code == 303, "signed out: back to the login page"


def test_the_next_page_after_signing_in_stays_on_this_site() -> None:
    app = new_app()
    app.web.protect(password_hash=HASH)
    for elsewhere in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        client = TestClient(app.web.asgi(), follow_redirects=False)
        token = csrf_of(client.get("/login").text)
        answer = client.post(
            f"/login?next={elsewhere}", data={"password": PASSWORD, "csrf_token": token}
        )
        assert answer.headers["location"] == "/", elsewhere


ACTIONS: list[tuple[str, dict[str, Any]]] = [
    ("/dlq/orders_dlq/redrive", {"all": "1"}),
    ("/explorer/orders/0/5/republish", {"to": "orders"}),
    ("/processes/host:1:ab/commands", {"command": "stop"}),
    ("/processes/host:1:ab/commands", {"command": "pause", "topic": "orders", "partition": "0"}),
]


@pytest.mark.parametrize(("path", "form"), ACTIONS)
def test_an_action_without_the_csrf_token_is_refused(path: str, form: dict[str, Any]) -> None:
    client = TestClient(new_app().web.asgi())
    client.get("/login")  # a session, with its token
    refused = client.post(path, data=form)
    assert refused.status_code == 403
    assert "CSRF" in refused.text
    forged = client.post(path, data={**form, "csrf_token": "guessed"})
    assert forged.status_code == 403
    api = client.post("/api/commands", json={"command": "stop", "process": "host:1:ab"})
    assert api.status_code == 403


@pytest.mark.parametrize(("path", "form"), ACTIONS)
def test_read_only_refuses_every_action_even_with_the_token(
    path: str, form: dict[str, Any]
) -> None:
    app = new_app()
    app.web.protect(read_only=True)
    client = TestClient(app.web.asgi())
    token = csrf_of(client.get("/login").text)
    refused = client.post(path, data={**form, "csrf_token": token})
    assert refused.status_code == 403
    assert "read-only" in refused.text


def test_the_policy_is_asked_with_the_user_the_action_and_the_target() -> None:
    asked: list[tuple[str | None, str, str]] = []

    def policy(user: str | None, action: str, target: str) -> bool:
        asked.append((user, action, target))
        return action == "probe"

    app = new_app()
    app.web.protect(password_hash=HASH, policy=policy)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    token = csrf_of(client.get("/login").text)
    client.post("/login", data={"password": PASSWORD, "csrf_token": token})
    token = csrf_of(client.get("/login", follow_redirects=True).text)
    refused = client.post(
        "/processes/host:1:ab/commands", data={"command": "stop", "csrf_token": token}
    )
    assert refused.status_code == 403
    assert ("admin", "stop", "host:1:ab") in asked
    refused = client.post("/dlq/orders_dlq/redrive", data={"all": "1", "csrf_token": token})
    assert refused.status_code == 403
    assert ("admin", "redrive", "orders_dlq") in asked


def test_a_policy_that_raises_refuses() -> None:
    def broken(user: str | None, action: str, target: str) -> bool:
        raise RuntimeError("no")

    assert not Access(policy=broken).allows("admin", "stop", "p")
    assert not Access(read_only=True).allows("admin", "probe", "p")
    assert Access().allows(None, "probe", "p")
    assert not Access().allows(None, "reboot", "p"), "an unknown action is refused"


def test_the_host_apps_authentication_counts_when_mounted() -> None:
    def host_user(request: Any) -> str | None:
        return request.headers.get("x-user")

    app = new_app()
    app.web.protect(authenticate=host_user)
    host = Starlette(routes=[Mount("/conveyor", app.web.asgi())])
    client = TestClient(host, follow_redirects=False)
    nobody = client.get("/conveyor/dlq")
    assert nobody.status_code == 401
    assert "Sign in to the application" in client.get("/conveyor/login").text
    signed_in = client.get("/conveyor/login", headers={"x-user": "ana"})
    assert signed_in.status_code == 303, "nothing to sign in to: on to the UI"
    assert signed_in.headers["location"] == "/conveyor/"


def test_bad_access_settings_are_refused_when_given() -> None:
    app = new_app()
    with pytest.raises(ConfigurationError) as refused:
        app.web.protect(password_hash=HASH, authenticate=lambda r: None)
    assert refused.value.setting == "password_hash"
    with pytest.raises(ConfigurationError) as refused:
        app.web.protect(secret="short")
    assert refused.value.setting == "secret"
