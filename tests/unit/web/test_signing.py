"""Signed commands without a broker: the key's sources and length, and each reason a request
is refused (unsigned, another key, tampered, expired, replayed); the schedules' allow-list."""

from __future__ import annotations

import re

import pytest

from conveyor import App, ConfigurationError, Consumer
from conveyor.web.commands import encode_signed
from conveyor.web.signing import HEADER, KEY_ENV, MAX_AGE, CommandSigner, commands_key

KEY = b"0123456789abcdef0123456789abcdef"
NOW = 1_800_000_000.0


def request(**changes: object) -> dict[str, object]:
    return {"type": "command", "id": "r1", "command": "stop", "process": "p", "args": {},
            "by": "test", "sent_at": NOW, **changes}  # fmt: skip


def signer() -> CommandSigner:
    return CommandSigner(KEY, "commands", clock=lambda: NOW)


def test_the_key_comes_from_the_argument_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert commands_key() is None
    monkeypatch.setenv(KEY_ENV, "e" * 20)
    assert commands_key() == b"e" * 20
    assert commands_key("a" * 16) == b"a" * 16
    monkeypatch.setenv(KEY_ENV, "short")
    with pytest.raises(ConfigurationError, match="at least 16 bytes") as error:
        commands_key()
    assert error.value.setting == KEY_ENV
    with pytest.raises(ConfigurationError) as error:
        App(client_id="k", kafka={"bootstrap.servers": "127.0.0.1:1"}).web.enable(
            commands_key=b"short"
        )
    assert error.value.setting == "commands_key"


def test_a_request_signed_with_the_key_is_carried_out_once() -> None:
    message = request()
    payload, headers = encode_signed(message, signer())
    assert signer().refusal(message, payload, dict(headers)) == ""
    checking = signer()
    assert checking.refusal(message, payload, dict(headers)) == ""
    assert checking.refusal(message, payload, dict(headers)).startswith("replayed")


@pytest.mark.parametrize(
    ("why", "change"),
    [
        ("unsigned", lambda payload, headers: (payload, {})),
        ("wrong signature", lambda payload, headers: (payload, {HEADER: b"v1=" + b"0" * 64})),
        (
            "wrong signature",  # the bytes changed after signing: another process, say
            lambda payload, headers: (payload.replace(b'"p"', b'"*"'), headers),
        ),
    ],
)
def test_an_unsigned_forged_or_tampered_request_is_refused(why: str, change) -> None:
    message = request()
    payload, headers = change(*encode_signed(message, signer()))
    headers = dict(headers)
    assert signer().refusal(message, payload, headers).startswith(why)


def test_another_keys_signature_is_refused() -> None:
    message = request()
    payload, headers = encode_signed(message, CommandSigner(b"x" * 32, "commands"))
    assert signer().refusal(message, payload, dict(headers)).startswith("wrong signature")


def test_a_request_signed_for_another_apps_topic_is_refused() -> None:
    """One key on two apps: a request captured on one app's commands topic is no good on the
    other's."""
    message = request()
    payload, headers = encode_signed(message, CommandSigner(KEY, "other_commands"))
    assert signer().refusal(message, payload, dict(headers)).startswith("wrong signature")


def test_a_request_sent_before_the_process_listened_is_refused() -> None:
    """A process reads commands from its start on: an older request can only be a copy
    replayed into it (a fleet stop, say, into processes restarted since)."""
    message = request(sent_at=NOW - 60)
    payload, headers = encode_signed(message, signer())
    assert (
        signer().refusal(message, payload, dict(headers), not_before=NOW - 30).startswith("expired")
    )
    assert signer().refusal(message, payload, dict(headers), not_before=NOW - 90) == ""


def test_the_example_manifests_placeholder_is_no_key() -> None:
    with pytest.raises(ConfigurationError, match="placeholder"):
        commands_key("CHANGE-ME-openssl-rand-hex-32")


@pytest.mark.parametrize("sent_at", [NOW - MAX_AGE - 1, NOW + MAX_AGE + 1, None, "now"])
def test_a_request_sent_outside_the_window_is_refused(sent_at: object) -> None:
    message = request(sent_at=sent_at)
    payload, headers = encode_signed(message, signer())
    assert signer().refusal(message, payload, dict(headers)).startswith("expired")


class Idle(Consumer):
    def consume(self) -> None:
        pass


def test_schedules_go_to_the_apps_topics_and_the_allowed_ones_only() -> None:
    app = App(client_id="allow", kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.routes.topic("orders", Idle)
    app.routes.topic("orders-dlq", None, active=False)
    app.routes.pattern(re.compile(r"events\..*"), Idle)
    app.schedules.enable(allowed_topics=["partner-feed", re.compile(r"audit-\d+")])
    app.recurring("0 0 * * *", lambda: None, topic="recurring-tasks")
    allows = app.schedules.allows
    assert all(map(allows, ["orders", "orders-dlq", "events.a", "partner-feed", "audit-7"]))
    assert not any(map(allows, ["payments", "audit-7x", "partner-feed2", "events"]))
    # routed, but control topics: a record there steers the app
    assert not any(map(allows, [app.schedules.topic, "recurring-tasks"]))
    anything = App(client_id="any", kafka={"bootstrap.servers": "127.0.0.1:1"})
    anything.schedules.enable(allowed_topics="*")
    assert anything.schedules.allows("payments")
    with pytest.raises(ConfigurationError) as error:
        App(client_id="bad", kafka={"bootstrap.servers": "127.0.0.1:1"}).schedules.enable(
            allowed_topics=["", 7]  # type: ignore[list-item]
        )
    assert error.value.setting == "allowed_topics"
