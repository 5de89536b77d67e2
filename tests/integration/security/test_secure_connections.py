"""Secure connections against the development broker started with ``--security``: every
client Conveyor makes (producer, the app's consumers, admin, iterator, RPC client) over
SASL_SSL with SCRAM-SHA-512 and over SSL with a client certificate, and PLAIN over
SASL_PLAINTEXT. The broker is one of the test's own, on free ports."""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

from conveyor import Admin, App, Consumer, KafkaError, OAuthToken, Producer
from conveyor.admin.acls import Acl
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.oauth_settings import unsecured_jwt_config
from conveyor.rpc import Client, Handlers
from helpers import conveyor_cli, free_ports

pytestmark = [
    pytest.mark.security,
    pytest.mark.xdist_group("brokers"),
]  # xdist: see tests/conftest.py


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The secured broker: ``plain`` (its PLAINTEXT bootstrap) and ``ways`` (client settings by
    way in, from the clients.json that ``start --security`` writes)."""
    root = tmp_path_factory.mktemp("secure") / "broker"
    started = conveyor_cli("broker", "start", "--security", "--port", free_ports([0, 1, 2, 3]),
                       "--data-dir", root, "--heap", "384m")  # fmt: skip
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        ways = json.loads((root / "security" / "clients.json").read_text())
        for settings in ways.values():
            if "sasl.password" in settings:
                assert settings["sasl.password"] not in started.stdout, "printed masked"
        plain = started.stdout.split("KAFKA_BOOTSTRAP_SERVERS=")[1].split()[0]
        yield {"plain": plain, "ways": ways}
    finally:
        conveyor_cli("broker", "stop", "--wipe", "--data-dir", root)


def new_topic(secure: dict[str, Any], partitions: int = 1) -> str:
    name = f"secure-{uuid.uuid4().hex[:10]}"
    with Admin({"bootstrap.servers": secure["plain"]}) as admin:
        admin.create_topic(name, partitions)
    return name


class Collect(Consumer):
    got: ClassVar[list[bytes]] = []
    changed: ClassVar[threading.Condition] = threading.Condition()

    def consume(self) -> None:
        with Collect.changed:
            Collect.got.extend(m.raw_payload or b"" for m in self.messages)
            Collect.changed.notify_all()


WAYS = ["SASL_SSL, SCRAM-SHA-512", "SSL, client certificate", "SASL_PLAINTEXT, PLAIN"]


@pytest.mark.parametrize("way", WAYS)
def test_producer_consumer_admin_and_iterator_over_a_secure_connection(
    secure: dict[str, Any], way: str
) -> None:
    settings = secure["ways"][way]
    topic = new_topic(secure, partitions=2)
    with Admin(settings) as admin:  # the admin itself over the secure listener
        assert topic in admin.list_topics()
        assert admin.topic_info(topic).partition_count == 2
    with Producer(settings) as producer:
        reports = producer.produce_many_sync(
            [{"topic": topic, "payload": f"m{n}".encode(), "key": f"k{n}"} for n in range(20)],
            reports=True,
        )
    assert len(reports) == 20

    Collect.got = []
    app = App(client_id="secure", kafka={**settings, "group.id": f"g-{topic}",
              "auto.offset.reset": "earliest"}, max_wait_time=0.1)  # fmt: skip
    app.routes.topic(topic, Collect)
    app.start()
    try:
        with Collect.changed:
            assert Collect.changed.wait_for(lambda: len(Collect.got) >= 20, 60), Collect.got
    finally:
        app.stop_and_wait()
    assert sorted(Collect.got) == sorted(f"m{n}".encode() for n in range(20))

    read: list[bytes] = []
    deadline = time.monotonic() + 60
    with app.iterator({topic: {0: 0, 1: 0}}, yield_nil=True) as iterator:
        for message in iterator:
            if message is not None:
                read.append(message.raw_payload or b"")
            if len(read) >= 20 or time.monotonic() > deadline:
                break
    assert sorted(read) == sorted(Collect.got)


@pytest.mark.parametrize("way", WAYS[:2])
def test_rpc_over_a_secure_connection(secure: dict[str, Any], way: str) -> None:
    settings = secure["ways"][way]
    commands, results = new_topic(secure), new_topic(secure)
    handlers = Handlers()

    @handlers.register("add")
    def add(a: int, b: int) -> int:
        return a + b

    server = App(client_id="secure-rpc", kafka={**settings, "group.id": f"g-{commands}"},
                 max_wait_time=0.05)  # fmt: skip
    server.routes.rpc(commands, handlers, results_topic=results)
    assigned = threading.Event()
    server.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    server.start()
    try:
        assert assigned.wait(60)
        with Client(settings, commands_topic=commands, results_topic=results) as client:
            assert client.call("add", 2, 3, timeout=30) == 5
    finally:
        server.stop_and_wait()


class Idle(Consumer):
    def consume(self) -> None:
        return None


def test_wrong_credentials_fail_fast_with_a_message_naming_authentication(
    secure: dict[str, Any],
) -> None:
    topic = new_topic(secure)
    wrong = {**secure["ways"]["SASL_SSL, SCRAM-SHA-512"], "sasl.password": "not-the-password"}
    no_certificate = {
        k: v for k, v in secure["ways"]["SSL, client certificate"].items()
        if not k.startswith("ssl.keystore")
    }  # fmt: skip

    def produce(settings: dict[str, Any]) -> None:
        with Producer(settings) as producer:
            producer.produce_sync(topic=topic, payload=b"x")

    def administer(settings: dict[str, Any]) -> None:
        with Admin(settings, timeout=60) as admin:
            admin.list_topics()

    def read_lags(settings: dict[str, Any]) -> None:
        with Admin(settings, timeout=60) as admin:
            admin.read_lags(["g"])  # a consumer client of the group reads its offsets

    def iterate(settings: dict[str, Any]) -> None:
        app = App(client_id="wrong", kafka={**settings, "group.id": "g"})
        with app.iterator({topic: {0: 0}}) as iterator:
            next(iter(iterator))

    def serve(settings: dict[str, Any]) -> None:
        app = App(client_id="wrong", kafka={**settings, "group.id": f"g-{topic}"})
        app.routes.topic(topic, Idle)
        crashed = threading.Event()
        app.monitor.subscribe("error.occurred", lambda e: crashed.set())
        app.start()
        try:
            assert crashed.wait(60), "the app goes on as if nothing were wrong"
        finally:
            app.stop_and_wait()
        assert app.crash is not None
        raise app.crash

    for settings, what in ((wrong, "SASL_SSL"), (no_certificate, "SSL")):
        for run in (produce, administer, read_lags, iterate, serve):
            started = time.monotonic()
            with pytest.raises(KafkaError, match=f"refused the .* authentication over {what}"):
                run(settings)
            # a generous bound: librdkafka's own timeouts (30 s and more) would be past it
            assert time.monotonic() - started < 10, f"{run.__name__} over {what} was slow"


def unsecured_jwt(subject: str, lifetime: float) -> tuple[str, float]:
    """A token Kafka's unsecured validator accepts: ``alg: none``, a ``sub`` and an ``exp``."""

    def part(claims: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()

    now = time.time()
    expiry = now + lifetime
    body = {"sub": subject, "iat": int(now), "exp": int(expiry)}
    return f"{part({'alg': 'none'})}.{part(body)}.", expiry


def test_oauth_tokens_from_the_app_s_provider_are_refreshed_during_a_run(
    secure: dict[str, Any],
) -> None:
    """Tokens live 12 s and the broker re-authenticates every session when its token expires,
    so a run of 25 s that keeps producing and consuming has used the refreshed tokens."""
    topic = new_topic(secure)
    issued: list[float] = []
    lock = threading.Lock()

    def provider() -> tuple[str, float]:
        with lock:
            issued.append(time.time())
        return unsecured_jwt("conveyor-test", 12.0)

    settings = secure["ways"]["SASL_PLAINTEXT, OAUTHBEARER (unsecured JWT)"]
    Collect.got = []
    app = App(client_id="oauth", kafka={**settings, "group.id": f"g-{topic}",
              "auto.offset.reset": "earliest"}, oauth_token_provider=provider,
              max_wait_time=0.1)  # fmt: skip
    app.routes.topic(topic, Collect)
    commands, results = new_topic(secure), new_topic(secure)
    handlers = Handlers()
    handlers.register("echo")(lambda text: text)
    app.routes.rpc(commands, handlers, results_topic=results)
    with app.admin as admin:  # the admin client gets its token from the provider too
        assert topic in admin.list_topics()
    app.start()
    sent: list[bytes] = []
    pace = threading.Event()
    try:
        started = time.monotonic()
        first_expiry = time.time() + 12
        while time.monotonic() - started < 25:
            payload = f"{len(sent)}".encode()
            app.producer.produce_sync(topic=topic, payload=payload)
            sent.append(payload)
            pace.wait(0.1)  # a steady trickle across the tokens' expiry
        with Collect.changed:
            assert Collect.changed.wait_for(lambda: len(Collect.got) >= len(sent), 60)
        with Client(app, commands_topic=commands, results_topic=results) as client:
            assert client.call("echo", "over oauth", timeout=30) == "over oauth"
        with app.iterator({topic: {0: 0}}, yield_nil=True) as iterator:
            first = next(m for m in iterator if m is not None)
        assert first.raw_payload == b"0"
    finally:
        app.stop_and_wait()
    assert app.crash is None, app.crash
    assert time.time() > first_expiry + 5, "the run outlived the first tokens"
    assert Collect.got == sent, "every message, in order, across the refresh"
    assert len(issued) >= 2, issued
    assert max(issued) - min(issued) >= 5, "a token was asked for again during the run"


def test_a_standalone_producer_gets_its_tokens_from_its_own_provider(
    secure: dict[str, Any],
) -> None:
    """``Producer(oauth_token_provider=)`` as ``App(oauth_token_provider=)``: the provider's
    token opens the OAUTHBEARER listener. A provider that returns no token fails the producer's
    construction at once, naming the provider (confluent-kafka would wait 10 s and say only that
    no token was set); a token the broker does not accept fails the first produce fast."""
    topic = new_topic(secure)
    settings = secure["ways"]["SASL_PLAINTEXT, OAUTHBEARER (unsecured JWT)"]
    issued: list[float] = []

    def provider() -> tuple[str, float]:
        issued.append(time.time())
        return unsecured_jwt("conveyor-producer", 60.0)

    with Producer(settings, oauth_token_provider=provider) as producer:
        report = producer.produce_sync(topic=topic, payload=b"over oauth")
    assert (report.topic, report.partition, report.offset) == (topic, 0, 0)
    assert len(issued) == 1, "one client, one token (asked while it was built, not twice)"
    with Admin({"bootstrap.servers": secure["plain"]}) as admin:
        assert [m.raw_payload for m in admin.read_topic(topic, 0, count=1)] == [b"over oauth"]

    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="returned NoneType, not a token") as refused:
        Producer(settings, oauth_token_provider=lambda: (None, time.time() + 60))
    assert refused.value.setting == "oauth_token_provider"
    with pytest.raises(ConfigurationError, match=r"returned str, not \(token, expiry\[, principal"):
        Producer(settings, oauth_token_provider=lambda: "just a token")
    assert time.monotonic() - started < 5, "refused at once, not after librdkafka's wait"

    started = time.monotonic()
    with (
        pytest.raises(KafkaError, match=r"refused the .* authentication over SASL_PLAINTEXT"),
        Producer(settings, oauth_token_provider=lambda: ("not-a-jwt", time.time() + 60)) as bad,
    ):
        bad.produce_sync(topic=topic, payload=b"x")
    assert time.monotonic() - started < 10, "a refused token fails fast"


def test_the_principal_name_and_sasl_extensions_reach_the_broker(
    secure: dict[str, Any],
) -> None:
    """Only ``User:alice`` may write the topic (an ACL). An unsecured JWT that librdkafka
    makes from ``unsecured_jwt_config("alice", extensions)`` writes it, and so does a token
    from a provider that returns an ``OAuthToken`` with a principal and extensions; the same
    as ``bob`` is refused: the principal is the broker's, and the extensions go along with the
    login (the broker's unsecured validator accepts any, and shows none)."""
    topic = new_topic(secure)
    with Admin({"bootstrap.servers": secure["plain"]}) as admin:
        admin.create_acls([Acl("topic", topic, "User:alice", op) for op in ("write", "describe")])
    oauth = secure["ways"]["SASL_PLAINTEXT, OAUTHBEARER (unsecured JWT)"]
    extensions = {"traceId": "abc123", "tenant": "eu"}

    def unsecured(principal: str) -> dict[str, Any]:
        return {**oauth, "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": unsecured_jwt_config(principal, extensions)}  # fmt: skip

    deadline = time.monotonic() + 60
    assert "AUTHORIZATION" in refused(unsecured("bob"), topic, deadline).upper(), "bob may not"
    with Producer(unsecured("alice")) as producer:
        producer.produce_sync(topic=topic, payload=b"as alice, unsecured", timeout=30)

    def provider(subject: str) -> Callable[[], OAuthToken]:
        def token() -> OAuthToken:
            jwt, expiry = unsecured_jwt(subject, 60.0)
            return OAuthToken(jwt, expiry, principal=subject, extensions=extensions)

        return token

    with Producer(oauth, oauth_token_provider=provider("alice")) as producer:
        producer.produce_sync(topic=topic, payload=b"as alice, provided", timeout=30)
    with (
        pytest.raises(ConveyorError, match=r"(?i)authorization"),
        Producer(oauth, oauth_token_provider=provider("bob")) as producer,
    ):
        producer.produce_sync(topic=topic, payload=b"as bob", timeout=30)
    with Admin({"bootstrap.servers": secure["plain"]}) as admin:
        written = [m.raw_payload for m in admin.read_topic(topic, 0, count=20)]
    # ("{}": bob's writes while the ACL was on its way to the broker)
    assert [p for p in written if p != b"{}"] == [b"as alice, unsecured", b"as alice, provided"]


def test_no_output_shows_a_secret(
    secure: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """The server's banner and logs (DEBUG), ``conveyor info``, the web UI's routing page and
    an error message about a bad setting: the password appears in none of them."""
    plain = secure["ways"]["SASL_PLAINTEXT, PLAIN"]
    password = plain["sasl.password"]
    topic = new_topic(secure)
    with Producer({"bootstrap.servers": secure["plain"]}) as producer:
        producer.produce_sync(topic=topic, payload=b"hello")
    marker = tmp_path / "consumed"
    env = {"SECURE_BOOTSTRAP": plain["bootstrap.servers"], "SECURE_PASSWORD": password,
           "TOPIC": topic, "GROUP": f"g-{topic}", "MARKER": str(marker)}  # fmt: skip
    here = Path(__file__).parent
    run_env = dict(os.environ, **env, PYTHONPATH=str(here), COLUMNS="200")
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "server", "--app", "secret_app:app",
             "--log-level", "DEBUG"],
            cwd=here, env=run_env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not marker.exists():  # the file appears when the message was consumed
                assert server.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                threading.Event().wait(0.1)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
    info = subprocess.run(
        [sys.executable, "-m", "conveyor", "info", "--app", "secret_app:app"],
        cwd=here, env=run_env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert info.returncode == 0, info.stderr
    assert "sasl.password" in info.stdout
    assert "********" in info.stdout

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(here))
    caplog.set_level(logging.DEBUG)
    import secret_app  # noqa: PLC0415 - configured by the environment just set

    page = TestClient(secret_app.app.web.asgi()).get("/routing")
    assert page.status_code == 200
    assert "sasl.password" in page.text
    with pytest.raises(ConfigurationError) as refused:
        # "x" first: librdkafka reads a number's leading digits, and a random password that
        # starts with, say, 5000 would be a valid timeout (the test failed that way once).
        App(kafka={**plain, "socket.timeout.ms": "x" + password})
    shown = {
        "server": log.read_text(), "info": info.stdout + info.stderr, "routing page": page.text,
        "error": str(refused.value), "repr": repr(secret_app.app.settings) + repr(secret_app.app.routes._topics),
        "logs": caplog.text,
    }  # fmt: skip
    assert "Conveyor" in shown["server"], "the banner was captured"
    for where, text in shown.items():
        assert password not in text, f"the password shows in the {where}"


GUARDED_APP = """\
from conveyor import App
from conveyor.web import WebTopics

app = App(client_id="guarded", kafka={{"bootstrap.servers": {plain!r}}})
app.web.enable(topics=WebTopics.prefixed({stem!r}))
app.schedules.enable(topic="{stem}-schedules", partitions=1)

@app.job(queue={stem!r})
def work():
    pass
"""


def refused(settings: dict[str, Any], topic: str, deadline: float) -> str:
    """Produce to ``topic`` as ``settings``' login until the broker refuses (ACLs take effect
    as the controller's log reaches the broker): the refusal's text ('' if none came)."""
    with Producer(settings) as producer:
        while time.monotonic() < deadline:
            try:
                producer.produce_sync(topic=topic, payload=b"{}", key="k", timeout=20)
            except ConveyorError as error:
                return str(error)
            time.sleep(0.2)  # not refused yet: the ACL is on its way to the broker
    return ""


def test_acls_leave_the_control_topics_to_the_app_and_its_operator(
    secure: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`conveyor acls apply` guards the commands, schedules and job topics: a login the app
    did not name, which could write them before, is refused after; the app's own login
    still writes them, and a topic without ACLs stays open to everyone."""
    plain, app_login = secure["plain"], secure["ways"]["SASL_SSL, SCRAM-SHA-512"]  # conveyor
    stem = f"guarded{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{stem}.py").write_text(GUARDED_APP.format(plain=plain, stem=stem))
    # the app's folder first, what runs the test after (a scratch copy of src/, say)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))
    )
    for command in (("topics", "migrate"), ("web", "install")):
        done = conveyor_cli(*command, "--app", f"{stem}:app")
        assert done.returncode == 0, done.stdout + done.stderr
    commands, schedules, jobs = f"{stem}_consumers_commands", f"{stem}-schedules", f"jobs-{stem}"
    open_topic = new_topic(secure)
    with Admin({"bootstrap.servers": plain}) as admin:
        admin.set_scram_credentials("intruder", "intruder-password")
    intruder = {**app_login, "sasl.username": "intruder", "sasl.password": "intruder-password"}
    soon = time.monotonic() + 60
    assert refused(intruder, commands, soon) == "", "no ACL yet: open, as without an authorizer"

    guard = ("--app", f"{stem}:app", "--principal", "User:conveyor", "--operator", "User:ops")
    planned = conveyor_cli("acls", "plan", *guard, "--json")
    assert planned.returncode == 0, planned.stderr
    named = {
        (acl["name"], acl["principal"], acl["operation"]) for acl in json.loads(planned.stdout)
    }
    for topic in (commands, schedules, jobs):
        assert (topic, "User:conveyor", "write") in named
    assert (commands, "User:ops", "write") in named
    assert (schedules, "User:ops", "write") in named, "the web UI cancels schedules"
    applied = conveyor_cli("acls", "apply", *guard)
    assert applied.returncode == 0, applied.stdout + applied.stderr

    deadline = time.monotonic() + 60
    for topic in (commands, schedules, jobs):
        assert "AUTHORIZATION" in refused(intruder, topic, deadline).upper(), topic
    with Producer(app_login) as producer:  # the app's own login goes on
        for topic in (commands, schedules, jobs):
            producer.produce_sync(topic=topic, payload=b"{}", key="k", timeout=30)
    assert refused(intruder, open_topic, time.monotonic() + 3) == "", "no ACL there: open"
    with Admin({"bootstrap.servers": plain}) as admin:
        on_commands = admin.describe_acls("topic", commands)
    assert {(acl.principal, acl.operation) for acl in on_commands} == {
        (who, op) for who in ("User:conveyor", "User:ops") for op in ("read", "write", "describe")
    }
