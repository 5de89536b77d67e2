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


@pytest.mark.parametrize(
    ("kafka", "named", "instead"),
    [
        ({"session.timeout.ms": 6000}, "session.timeout.ms", "group.consumer.session.timeout.ms"),
        ({"heartbeat.interval.ms": 500}, "heartbeat.interval.ms", "heartbeat.interval.ms"),
        ({"partition.assignment.strategy": "range"}, "partition.assignment.strategy",
         "group.remote.assignor"),
        ({"group.protocol.type": "consumer"}, "group.protocol.type", "classic protocol"),
    ],
)  # fmt: skip
def test_the_new_group_protocol_refuses_what_it_moved_to_the_broker(
    kafka: dict[str, Any], named: str, instead: str
) -> None:
    settings = {"bootstrap.servers": "127.0.0.1:1", "group.protocol": "consumer", **kafka}
    with pytest.raises(ConfigurationError) as raised:
        App(client_id="unit", kafka=settings)
    assert raised.value.setting == named
    assert "group.protocol=consumer" in str(raised.value)
    assert instead in str(raised.value)
    # the same settings are fine under the classic protocol
    App(client_id="unit", kafka={**settings, "group.protocol": "classic"})


def test_a_routes_own_settings_are_checked_with_the_apps_group_protocol() -> None:
    app = App(
        client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1", "group.protocol": "consumer"}
    )
    app.routes.topic("orders", Noop, kafka={"session.timeout.ms": 6000})
    with pytest.raises(ConfigurationError, match=r"orders.*group\.protocol=consumer") as raised:
        app.run()
    assert raised.value.setting == "session.timeout.ms"


def test_an_unknown_group_protocol_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'classic' or 'consumer'") as raised:
        App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1", "group.protocol": "next"})
    assert raised.value.setting == "group.protocol"


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
