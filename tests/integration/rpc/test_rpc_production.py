"""RPC for production, against real brokers: arguments checked from type hints (the handler
never runs with wrong ones), an authorization hook that sees the request and its headers,
retries answered from the server's reply cache (the handler runs once), the monitor's RPC
events, and a call made while the broker is down: retried after it comes back, its handler
run once."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from conveyor import Admin, App, RemoteError
from conveyor.broker import DevelopmentBroker
from conveyor.rpc import Client, Handlers
from helpers import running


def server_app(
    bootstrap: str, commands: str, results: str, handlers: Handlers, **options: Any
) -> App:
    app = App(client_id="rpc", kafka={"bootstrap.servers": bootstrap,
                                      "group.id": f"rpc-{uuid.uuid4().hex[:6]}",
                                      # a broker's restart: rejoin after 10 s, not 45
                                      "session.timeout.ms": 10_000},
              max_wait_time=0.05, concurrency=2)  # fmt: skip
    app.routes.rpc(commands, handlers, results_topic=results, **options)
    return app


def wait_assigned(app: App) -> threading.Event:
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    return assigned


def test_arguments_authorization_retries_and_events(kafka_bootstrap: str, new_topic) -> None:
    commands, results = new_topic(), new_topic()
    handlers = Handlers()
    ran: Counter[str] = Counter()

    @handlers.register("transfer")
    def transfer(account: str, cents: int, note: str | None = None) -> str:
        ran["transfer"] += 1
        return f"{account}:{cents}"

    @handlers.register("slow")
    def slow(seconds: float) -> str:
        ran["slow"] += 1
        threading.Event().wait(seconds)
        return "done"

    seen: list[tuple[str, dict[str, bytes]]] = []

    def authorize(request: dict[str, Any], headers: dict[str, bytes]) -> bool:
        seen.append((request["name"], headers))
        return headers.get("token") == b"secret"

    app = server_app(kafka_bootstrap, commands, results, handlers, authorize=authorize)
    events: list[Any] = []
    for name in ("rpc.request.handled", "rpc.request.duplicate", "rpc.request.refused"):
        app.monitor.subscribe(name, events.append)
    assigned = wait_assigned(app)
    with running(app):
        assert assigned.wait(30)
        kafka = {"bootstrap.servers": kafka_bootstrap}
        with Client(kafka, commands_topic=commands, results_topic=results,
                    headers={"token": "secret"}, retries=3) as client:  # fmt: skip
            client_events: list[Any] = []
            for name in ("rpc.call.sent", "rpc.call.replied", "rpc.reply.discarded"):
                client.monitor.subscribe(name, client_events.append)
            assert client.call("transfer", "acct-1", 250, timeout=10) == "acct-1:250"
            with pytest.raises(RemoteError) as wrong:
                client.call("transfer", "acct-1", "250", timeout=10)
            assert wrong.value.type == "InvalidArguments"
            assert "cents must be int, not str" in str(wrong.value)
            with pytest.raises(RemoteError, match="unexpected keyword"):
                client.call("transfer", "acct-1", 5, colour="red", timeout=10)
            assert ran["transfer"] == 1, "a call with wrong arguments runs nothing"

            # four attempts of 1 s each; the handler takes 1.5 s: attempt 2 goes out while it
            # runs, attempts 3 and 4 after its reply: answered from the cache
            assert client.call("slow", 1.5, timeout=4.0) == "done"
            sends = [e["attempt"] for e in client_events if e.name == "rpc.call.sent"]
            assert max(sends) >= 2, sends
        with Client(kafka, commands_topic=commands, results_topic=results,
                    headers={"token": "guess"}) as intruder:  # fmt: skip
            with pytest.raises(RemoteError) as refused:
                intruder.call("transfer", "acct-1", 1, timeout=10)
            assert refused.value.type == "Unauthorized"
        deadline = time.monotonic() + 10
        while not any(e.name == "rpc.request.duplicate" for e in events):
            assert time.monotonic() < deadline, events
            threading.Event().wait(0.1)  # the retries reach the server after the reply
    assert ran["slow"] == 1, "retries of one call run its handler once"
    assert ran["transfer"] == 1
    assert ("transfer", {"token": b"guess"}) in seen
    assert any(e.name == "rpc.request.refused" for e in events)
    handled = [e for e in events if e.name == "rpc.request.handled"]
    assert {e["command"] for e in handled} == {"transfer", "slow"}
    assert any(e["error_type"] == "InvalidArguments" for e in handled)
    assert any(e.name == "rpc.call.replied" and e["ok"] for e in client_events)


_SERVER_EVENTS = (
    "connection.lost",
    "connection.restored",
    "rebalance.partitions_assigned",
    "rebalance.partitions_revoked",
    "rpc.request.handled",
    "rpc.request.duplicate",
    "rpc.request.expired",
)


@pytest.mark.xdist_group("brokers")  # see tests/conftest.py
def test_a_call_made_while_the_broker_is_down_runs_its_handler_once(
    own_broker: DevelopmentBroker, own_bootstrap: str
) -> None:
    bootstrap = own_bootstrap
    commands, results = f"cmd-{uuid.uuid4().hex[:6]}", f"res-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(commands, partitions=1)
        admin.create_topic(results, partitions=1)
    handlers = Handlers()
    ran: Counter[str] = Counter()
    handled = threading.Event()

    @handlers.register("charge")
    def charge(order: str) -> str:
        ran[order] += 1
        handled.set()
        return f"charged {order}"

    app = server_app(bootstrap, commands, results, handlers)
    assigned = wait_assigned(app)
    outcome: list[Any] = []
    # what happened when, for the failure's message: which side stalled
    started = time.monotonic()
    timeline: list[str] = []

    def note(what: str) -> None:
        timeline.append(f"{time.monotonic() - started:6.1f} s {what}")

    def noted(event: Any) -> None:
        note(f"{event.name} {dict(event)}" if event.name.startswith("rpc.") else event.name)

    for name in _SERVER_EVENTS:
        app.monitor.subscribe(name, noted)
    with running(app):
        assert assigned.wait(60)
        client = Client({"bootstrap.servers": bootstrap}, commands_topic=commands,
                        results_topic=results, retries=10)  # fmt: skip
        for name in ("rpc.call.sent", "rpc.call.replied", "rpc.reply.discarded"):
            client.monitor.subscribe(name, noted)
        try:
            assert client.call("charge", "warm-up", timeout=30) == "charged warm-up"
            note("broker stopping")
            own_broker.stop()  # down before the call: it waits in the producer, then retries
            note("broker stopped")

            def call() -> None:
                try:
                    outcome.append(client.call("charge", "o-1", timeout=90))
                except Exception as error:
                    outcome.append(error)

            caller = threading.Thread(target=call)
            caller.start()
            threading.Event().wait(4.0)  # a few attempts go nowhere
            own_broker.start()
            note("broker started")
            caller.join(120)
        finally:
            client.close()
    # the whole timeline in the message (a tuple's repr is cut short)
    assert outcome == ["charged o-1"], "\n".join([repr(outcome), *timeline])
    assert handled.is_set()
    assert ran["o-1"] == 1, "every attempt carried the same id: the handler ran once"
