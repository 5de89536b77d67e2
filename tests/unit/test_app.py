"""The App checks every setting when it is built (librdkafka's too, without connecting) and a
start that fails leaves nothing running."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer


class Noop(Consumer):
    def consume(self) -> None:
        return None


@pytest.mark.parametrize(
    ("kafka", "named"),
    [
        ({"sesion.timeout.ms": 6000}, "sesion.timeout.ms"),
        ({"session.timeout.ms": "abc"}, "session.timeout.ms"),
        ({"auto.offset.reset": "bogus"}, "auto.offset.reset"),
        ({"isolation.level": "sometimes"}, "isolation.level"),
        ({"acks": "several"}, "acks"),
        ({"linger.ms": -5}, "linger.ms"),
        ({"compression.type": "zip"}, "compression.type"),
    ],
)
def test_librdkafka_settings_are_checked_when_the_app_is_built(
    kafka: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1", **kafka})
    assert raised.value.setting == named
    assert named in str(raised.value)


def test_good_settings_pass_without_a_broker() -> None:
    app = App(
        client_id="unit",
        kafka={
            "bootstrap.servers": "127.0.0.1:1",
            "auto.offset.reset": "latest",
            "session.timeout.ms": 6000,
            "acks": "1",
            "enable.idempotence": False,
        },
    )
    assert app.settings.kafka["auto.offset.reset"] == "latest"


def test_a_start_that_fails_leaves_nothing_running() -> None:
    """Filters that leave no route: the start fails, no worker thread stays, the app can
    still be started (here: it fails the same way again, not with "already running")."""
    app = App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.routes.topic("orders", Noop)
    before = {thread.ident for thread in threading.enumerate()}
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="no route has topic"):
            app.start(topics=["payments"])
        assert app.state == "idle"
    started = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert started == []
    assert app.snapshot().pool is None
