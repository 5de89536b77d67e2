"""What ``enqueue`` sends, without a broker (the app's producers capture): a job parameter
named ``key`` reaches the function while ``options(key=...)`` sets the message key;
``enqueue_async`` sends the same message; an enqueue inside a transaction of the app's
transactional producer is part of it (aborted: never sent), one inside another producer's
transaction is refused."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from conveyor import App, Producer, testing
from conveyor.errors import TransactionError
from conveyor.jobs import Enqueuer


def make_app() -> App:
    return App(client_id="enqueue", kafka={"bootstrap.servers": "127.0.0.1:9"})


def _sent(app: App, topic: str) -> list[tuple[Any, dict[str, Any]]]:
    """(message key, envelope) of what was sent to ``topic``."""
    return [
        (m.raw_key.decode() if m.raw_key is not None else None, json.loads(m.raw_payload or b""))
        for m in testing.produced(app, topic)
    ]


def test_a_parameter_named_key_is_the_functions_and_options_set_the_message_key() -> None:
    app = make_app()
    testing.capture(app)

    @app.job(queue="mail")
    def send(key: str, body: str = "") -> None:
        pass

    send.enqueue(key="welcome", body="hi")
    enqueuer = send.options(key="customer-7")
    assert isinstance(enqueuer, Enqueuer)
    enqueuer.enqueue(key="reminder")
    enqueuer.enqueue_in(60, key="later")
    [(first_key, first), (second_key, second), *_] = _sent(app, send.queue.topic)
    assert (first_key, first["kwargs"]) == (None, {"key": "welcome", "body": "hi"})
    assert (second_key, second["kwargs"]) == ("customer-7", {"key": "reminder"})
    assert send.takes_key


def test_key_stays_the_message_key_for_a_job_without_such_a_parameter() -> None:
    app = make_app()
    testing.capture(app)

    @app.job(queue="mail")
    def send(address: str, **extra: Any) -> None:
        pass

    send.enqueue("ada@example.com", key="ada")
    [(key, envelope)] = _sent(app, send.queue.topic)
    assert (key, envelope["args"], envelope["kwargs"]) == ("ada", ["ada@example.com"], {})


def test_delay_and_when_are_the_methods_own_so_parameters_of_those_names_pass() -> None:
    app = make_app()
    captured = testing.capture(app)

    @app.job(queue="mail")
    def remind(delay: int, when: str) -> None:
        pass

    remind.enqueue_in(30, delay=5, when="soon")
    remind.enqueue_at(4_000_000_000, delay=6, when="later")
    scheduled = [json.loads(r.value() or b"") for r in captured.records]  # the jobs' envelopes
    assert [e["kwargs"] for e in scheduled] == [
        {"delay": 5, "when": "soon"},
        {"delay": 6, "when": "later"},
    ]


def test_enqueue_async_sends_the_same_message() -> None:
    app = make_app()
    testing.capture(app)

    @app.job(queue="mail")
    def send(address: str) -> None:
        pass

    async def main() -> tuple[str, str]:
        return (
            await send.enqueue_async("ada@example.com", key="ada"),
            await send.options(key="bob").enqueue_async("bob@example.com"),
        )

    ids = asyncio.run(main())
    sent = _sent(app, send.queue.topic)
    assert [(key, e["args"], e["id"]) for key, e in sent] == [
        ("ada", ["ada@example.com"], ids[0]),
        ("bob", ["bob@example.com"], ids[1]),
    ]


def test_an_enqueue_inside_the_apps_transaction_is_part_of_it() -> None:
    app = make_app()
    captured = testing.capture(app)

    @app.job(queue="mail")
    def send(address: str) -> None:
        pass

    producer = app.transactional_producer

    def aborted() -> None:
        with producer.transaction():
            send.enqueue("aborted@example.com")
            raise RuntimeError("the block fails: the transaction aborts")

    with pytest.raises(RuntimeError):
        aborted()
    with producer.transaction():
        send.enqueue("committed@example.com")
    assert [e["args"] for _, e in _sent(app, send.queue.topic)] == [["committed@example.com"]]
    assert [json.loads(r.value() or b"")["args"] for r in captured.aborted] == [
        ["aborted@example.com"]
    ]


def test_an_enqueue_inside_another_producers_transaction_is_refused() -> None:
    app = make_app()
    testing.capture(app)

    @app.job(queue="mail")
    def send(address: str) -> None:
        pass

    own = testing.CapturingProducer(
        {"bootstrap.servers": "127.0.0.1:9", "transactional.id": "own"},
        captured=testing.Captured(),
    )
    try:
        with pytest.raises(TransactionError, match="another producer"), own.transaction():
            send.enqueue("ada@example.com")
    finally:
        own.close(0)
    assert isinstance(own, Producer)
