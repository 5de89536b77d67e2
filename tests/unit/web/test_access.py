"""Who may do what, without a broker: passwords are hashed (never kept), session cookies are
signed and expire, a closed UI sends visitors to the login page (401 under /api), every
action needs the page's CSRF token, read-only mode hides and refuses actions, the policy is
asked with the user, the action and its target, and the host app's authentication counts
when the UI is mounted in one."""

from __future__ import annotations

import base64
import re
import time
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from conveyor import App, Consumer
from conveyor.errors import ConfigurationError
from conveyor.web.access import (
    Access,
    BasicLogin,
    Session,
    Sessions,
    hash_password,
    verify_password,
)
from conveyor.web.ui.guard import is_open, route_path

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


def sign_in(client: TestClient) -> str:
    """Signs in; returns the session cookie's value."""
    token = csrf_of(client.get("/login").text)
    signed_in = client.post("/login", data={"password": PASSWORD, "csrf_token": token})
    assert signed_in.status_code == 303
    return str(client.cookies[Sessions.COOKIE])


def test_a_cookie_copied_before_sign_out_no_longer_signs_in() -> None:
    """Sign out ends the session itself, not only this browser's cookie: a signed cookie
    copied before once still signed in after Sign out, until its expiry."""
    app = new_app()
    app.web.protect(password_hash=HASH)
    ui = app.web.asgi()
    client = TestClient(ui, follow_redirects=False)
    copied = sign_in(client)
    thief = TestClient(ui, follow_redirects=False)
    thief.cookies.set(Sessions.COOKIE, copied)
    signed_in = 'id="user">admin<'
    assert signed_in in thief.get("/login").text, "the copy works while signed in"
    page = client.get("/login")
    assert client.post("/logout", data={"csrf_token": csrf_of(page.text)}).status_code == 303
    assert signed_in not in thief.get("/login").text, "signed out: the copy is refused too"
    assert thief.get("/api/dlq").status_code == 401
    sign_in(client)  # signing in again opens a new session
    assert signed_in in client.get("/login").text


def test_a_session_unused_for_its_idle_time_ends_and_use_keeps_it_alive() -> None:
    sessions = Sessions(b"k" * 32, idle_seconds=600)
    session = Session.new("admin", 3600)
    value = sessions.dump(session)
    assert sessions.load(value, now=session.seen + 590) == session
    assert sessions.load(value, now=session.seen + 610) is None, "idle too long"
    assert sessions.touched(session, now=session.seen + 30) is None, "too soon for a new cookie"
    used = sessions.touched(session, now=session.seen + 300)
    assert used is not None
    assert (used.csrf, used.seen) == (session.csrf, session.seen + 300)
    assert sessions.load(sessions.dump(used), now=session.seen + 610) == used
    with pytest.raises(ConfigurationError) as refused:
        Access(session_idle_seconds=0)
    assert refused.value.setting == "session_idle_seconds"


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
    ("/dlq/jobs-emails-dead/discard", {"refs": "0:1"}),
    ("/explorer/orders/0/5/republish", {"to": "orders"}),
    ("/processes/host:1:ab/commands", {"command": "stop"}),
    ("/processes/host:1:ab/commands", {"command": "pause", "topic": "orders", "partition": "0"}),
    ("/schedules/0af3/cancel", {}),
    ("/schedules/tasks/run", {"task": "report"}),
    ("/schedules/tasks/disable", {"task": "report"}),
    ("/schedules/tasks/enable", {"task": "report"}),
    ("/processes/commands", {"command": "quiet", "process": "*"}),
    ("/processes/commands", {"command": "stop", "process": "*", "group": "orders"}),
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
    for form, target in (({}, "*"), ({"group": "orders"}, "* in group orders")):
        fleet = {"command": "quiet", "process": "*", "csrf_token": token, **form}
        refused = client.post("/processes/commands", data=fleet)
        assert refused.status_code == 403, "every process needs the quiet action too"
        assert ("admin", "quiet", target) in asked
        api = client.post(
            "/api/commands", json={**fleet, "command": "stop"}, headers={"X-CSRF-Token": token}
        )
        assert api.status_code == 403
        assert ("admin", "stop", target) in asked
    refused = client.post("/dlq/orders_dlq/redrive", data={"all": "1", "csrf_token": token})
    assert refused.status_code == 403
    assert ("admin", "redrive", "orders_dlq -> original") in asked
    refused = client.post("/schedules/0af3/cancel", data={"csrf_token": token})
    assert refused.status_code == 403
    assert ("admin", "cancel", "0af3") in asked, "a schedule's id"
    refused = client.post("/schedules/tasks/disable", data={"task": "report", "csrf_token": token})
    assert refused.status_code == 403
    assert ("admin", "disable", "report") in asked, "a task's name"


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


def test_an_async_host_check_is_awaited_and_a_wrong_answer_signs_nobody_in() -> None:
    async def host_user(request: Any) -> str | None:
        return request.headers.get("x-user")

    app = new_app()
    app.web.protect(authenticate=host_user)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    assert client.get("/dlq").status_code == 401, "a coroutine is not a user"
    assert client.get("/login", headers={"x-user": "ana"}).status_code == 303

    app = new_app()
    app.web.protect(authenticate=lambda request: 42)  # type: ignore[arg-type,return-value]
    assert TestClient(app.web.asgi()).get("/dlq").status_code == 401


def test_a_host_users_session_and_token_are_their_own() -> None:
    app = new_app()
    app.web.protect(authenticate=lambda request: request.headers.get("x-user"))
    client = TestClient(app.web.asgi(), follow_redirects=False)
    first = client.get("/login")  # anonymous: a session of its own
    anonymous = Sessions(app.web.access.secret).load(first.cookies.get(Sessions.COOKIE))
    assert anonymous is not None
    assert anonymous.user is None
    signed_in = client.get("/login", headers={"x-user": "ana"})
    session = Sessions(app.web.access.secret).load(signed_in.cookies.get(Sessions.COOKIE))
    assert session is not None
    assert session.user == "ana"
    assert session.csrf != anonymous.csrf, "a planted anonymous token is no use once signed in"


def test_only_the_login_page_static_files_and_metrics_are_open() -> None:
    app = new_app()
    app.web.protect(password_hash=HASH)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    for path in ("/explorer/logins", "/explorer/static", "/loginx", "/api/login"):
        assert client.get(path).status_code in (303, 401), path
    assert client.get("/static/conveyor.css").status_code == 200
    assert client.get("/metrics").status_code == 404, "open (and not enabled here)"
    scope = {"type": "http", "path": "/explorer/logins", "root_path": "/conveyor"}
    assert route_path(scope) == "/explorer/logins", "a root path not in front is left alone"
    assert route_path({**scope, "path": "/conveyor/login"}) == "/login"
    assert not is_open(route_path(scope))


def test_a_mangled_cookie_reads_as_no_session() -> None:
    sessions = Sessions(b"k" * 32)
    assert sessions.load("e30=.\u00e9t\u00e9") is None
    client = TestClient(new_app().web.asgi())
    mangled = f"{Sessions.COOKIE}=abc.d\u00e9f".encode("latin-1")
    assert client.get("/login", headers={"cookie": mangled}).status_code == 200


def test_sign_in_attempts_are_limited_per_client() -> None:
    app = new_app()
    app.web.protect(password_hash=HASH)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    token = csrf_of(client.get("/login").text)
    codes = [
        client.post("/login", data={"password": "guess", "csrf_token": token}).status_code
        for _ in range(11)
    ]
    assert codes == [401] * 10 + [429]
    right = client.post("/login", data={"password": PASSWORD, "csrf_token": token})
    assert right.status_code == 429, "even the right password waits out the minute"


def test_messages_are_never_sent_into_the_uis_own_or_internal_topics() -> None:
    app = new_app()
    client = TestClient(app.web.asgi())
    token = csrf_of(client.get("/login").text)
    for topic in (app.web.topics.commands, "__consumer_offsets"):
        refused = client.post(
            "/api/explorer/orders/0/1/republish",
            json={"to": topic},
            headers={"X-CSRF-Token": token},
        )
        assert refused.status_code == 400, topic
        assert "internal" in refused.json()["error"]
        refused = client.post(
            "/api/dlq/orders_dlq/redrive", json={"all": True, "to": topic},
            headers={"X-CSRF-Token": token},
        )  # fmt: skip
        assert refused.status_code == 400, topic


def test_the_policy_sees_where_messages_go() -> None:
    asked: list[str] = []

    def policy(user: str | None, action: str, target: str) -> bool:
        asked.append(target)
        return False

    app = new_app()
    app.web.protect(policy=policy)
    client = TestClient(app.web.asgi())
    token = csrf_of(client.get("/login").text)
    client.post(
        "/api/explorer/orders/0/1/republish", json={"to": "audit"}, headers={"X-CSRF-Token": token}
    )
    client.post("/api/dlq/orders_dlq/redrive", json={"all": True}, headers={"X-CSRF-Token": token})
    client.post(
        "/api/commands", json={"command": "seek", "process": "h:1:a", "topic": "orders",
                               "partition": 2, "offset": 5}, headers={"X-CSRF-Token": token},
    )  # fmt: skip
    assert asked == ["orders/0@1 -> audit", "orders_dlq -> original", "orders/2 in h:1:a"]


def test_the_asyncapi_page_and_document_are_served_behind_the_guard() -> None:
    app = new_app()
    app.routes.topic("orders", _Orders, dead_letter_queue={"topic": "orders_dlq"})
    open_ui = TestClient(app.web.asgi())
    document = open_ui.get("/api/asyncapi").json()
    assert document["asyncapi"] == "3.0.0"
    assert set(document["channels"]) == {"orders", "orders_dlq"}
    page = open_ui.get("/asyncapi").text
    assert "<code>receive_orders_shop</code>" in page
    assert "asyncapi: &#34;3.0.0&#34;" in page or 'asyncapi: "3.0.0"' in page
    closed = new_app()
    closed.routes.topic("orders", _Orders)
    closed.web.protect(password_hash=HASH)
    guarded = TestClient(closed.web.asgi(), follow_redirects=False)
    assert guarded.get("/api/asyncapi").status_code == 401
    assert guarded.get("/asyncapi").status_code == 303


class _Orders(Consumer):
    def consume(self) -> None: ...


def test_basic_credentials_sign_in_only_the_user_with_the_password() -> None:
    login = BasicLogin("admin", HASH)

    def header(text: str) -> str:
        return "Basic " + base64.b64encode(text.encode()).decode()

    assert login.user_of(header(f"admin:{PASSWORD}")) == "admin"
    assert login.user_of(header(f"admin:{PASSWORD}")) == "admin", "remembered: no scrypt again"
    assert login.user_of(header(f"root:{PASSWORD}")) is None, "another user"
    assert login.user_of(header("admin:guess")) is None
    assert login.user_of(header(f"admin{PASSWORD}")) is None, "no colon"
    assert login.user_of("Basic not*base64") is None
    assert login.user_of(f"Bearer {PASSWORD}") is None, "another scheme"
    with pytest.raises(ConfigurationError):
        BasicLogin("admin", "plain-text-password")


def test_a_rest_client_signs_in_with_each_call_and_needs_no_csrf_token() -> None:
    asked: list[tuple[str | None, str, str]] = []

    def policy(user: str | None, action: str, target: str) -> bool:
        asked.append((user, action, target))
        return False

    app = new_app()
    app.web.protect(password_hash=HASH, policy=policy)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    stop = {"command": "stop", "process": "host:1:ab"}
    assert client.post("/api/commands", json=stop).status_code == 401
    wrong = client.post("/api/commands", json=stop, auth=("admin", "guess"))
    assert wrong.status_code == 401
    assert "www-authenticate" not in wrong.headers, "no challenge: browsers keep no password"
    right = client.post("/api/commands", json=stop, auth=("admin", PASSWORD))
    assert right.status_code == 403, "past the sign-in and the CSRF check: the policy said no"
    assert asked == [("admin", "stop", "host:1:ab")]


def test_the_connect_api_of_a_closed_ui_answers_as_kafka_connect_does() -> None:
    app = new_app()
    app.web.protect(password_hash=HASH)
    client = TestClient(app.web.asgi(), follow_redirects=False)
    nobody = client.get("/connect/connectors")
    assert nobody.status_code == 401
    assert nobody.json() == {"error_code": 401, "message": "sign in first"}
    wrong = client.get("/connect/connectors", auth=("admin", "guess"))
    assert wrong.status_code == 401
    assert wrong.json()["error_code"] == 401
    page = client.get("/connectors", auth=("admin", "guess"))
    assert page.status_code == 401
    assert "error" in page.json(), "the Connectors page is the UI's, not Connect's API"
    codes = [client.get("/connect", auth=("admin", "guess")).status_code for _ in range(9)]
    assert codes[-1] == 429, "failed sign-ins are limited per client here too"
