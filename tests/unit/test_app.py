"""The App checks every setting when it is built (librdkafka's too, without connecting) and a
start that fails leaves nothing running."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer, Producer
from conveyor.validation import check_kafka_values


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


WRONG_TYPES = [None, [], object(), "abc"]
READ_BY_CONVEYOR = [
    "message.timeout.ms",
    "delivery.timeout.ms",
    "message.max.bytes",
    "max.poll.interval.ms",
    "auto.commit.interval.ms",
    "transaction.timeout.ms",
]


@pytest.mark.parametrize("value", WRONG_TYPES)
@pytest.mark.parametrize("name", [*READ_BY_CONVEYOR, "group.id", "linger.ms", "partitioner"])
def test_a_kafka_setting_of_the_wrong_type_is_named_for_app_and_producer(
    name: str, value: Any
) -> None:
    """None or a wrong type once escaped as TypeError (float() of None) or, for group.id=None,
    aborted the process inside librdkafka; now each is a ConfigurationError naming it."""
    if value == "abc" and name not in READ_BY_CONVEYOR:
        return  # a string librdkafka itself judges (and names), tested above
    for build in (
        lambda kafka: App(client_id="unit", kafka=kafka),
        Producer,
    ):
        with pytest.raises(ConfigurationError) as raised:
            build({"bootstrap.servers": "127.0.0.1:1", name: value})
        assert raised.value.setting == name
        assert name in str(raised.value)


def test_paths_and_callbacks_librdkafka_takes_stay_accepted(tmp_path: Path) -> None:
    """The type check refuses None and containers, not what confluent-kafka converts or calls."""
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    settings = {
        "bootstrap.servers": "127.0.0.1:1",
        "ssl.ca.location": ca,
        "on_delivery": lambda *_: None,
        "error_cb": lambda *_: None,
    }
    check_kafka_values(settings)
    for wrong in ([], {"a": 1}, b"bytes"):
        with pytest.raises(ConfigurationError):
            check_kafka_values({"ssl.ca.location": wrong})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"middleware": None}, "middleware"),
        ({"middleware": 1.5}, "middleware"),
        ({"wait_timeout": "1"}, "wait_timeout"),
        ({"max_reloads": None}, "max_reloads"),
        ({"queue_full_timeout": None}, "queue_full_timeout"),
    ],
)
def test_the_producer_s_own_settings_of_the_wrong_type_are_named(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Producer({"bootstrap.servers": "127.0.0.1:1"}, **options)
    assert raised.value.setting == named


@pytest.mark.parametrize("value", [None, "1", 1.5, [], object()])
@pytest.mark.parametrize(
    "name",
    [
        "concurrency",
        "max_messages",
        "max_wait_time",
        "shutdown_timeout",
        "pause_timeout",
        "pause_with_exponential_backoff",
        "inline_quick_batches",
        "client_id",
    ],
)
def test_the_app_s_own_settings_of_the_wrong_type_are_named(name: str, value: Any) -> None:
    if value == "1" and name == "client_id":
        value = ""  # any other string is a good client id
    if value == 1.5 and name in ("max_wait_time", "shutdown_timeout", "pause_timeout"):
        return  # a number of seconds: right
    with pytest.raises(ConfigurationError) as raised:
        App(kafka={"bootstrap.servers": "127.0.0.1:1"}, **{name: value})
    assert raised.value.setting == name


def test_event_loop_blocked_after_is_checked() -> None:
    settings = {"bootstrap.servers": "127.0.0.1:1"}
    assert App(kafka=settings).settings.event_loop_blocked_after == 0.25
    assert (
        App(kafka=settings, event_loop_blocked_after=None).settings.event_loop_blocked_after is None
    )
    for wrong in (0, -1, "1", True):
        with pytest.raises(ConfigurationError) as raised:
            App(kafka=settings, event_loop_blocked_after=wrong)
        assert raised.value.setting == "event_loop_blocked_after"


def test_instance_id_is_checked() -> None:
    assert App(kafka={"bootstrap.servers": "127.0.0.1:1"}, instance_id="pod-3").settings.instance_id
    for wrong in ("", "a b", 7, "x/y"):
        with pytest.raises(ConfigurationError) as raised:
            App(kafka={"bootstrap.servers": "127.0.0.1:1"}, instance_id=wrong)
        assert raised.value.setting == "instance_id"


@pytest.mark.parametrize(
    ("kafka", "named", "instead"),
    [
        ({"session.timeout.ms": 6000}, "session.timeout.ms", "group.consumer.session.timeout.ms"),
        ({"heartbeat.interval.ms": 500}, "heartbeat.interval.ms", "heartbeat.interval.ms"),
        (
            {"partition.assignment.strategy": "range"},
            "partition.assignment.strategy",
            "group.remote.assignor",
        ),
        ({"group.protocol.type": "consumer"}, "group.protocol.type", "classic protocol"),
    ],
)
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


def test_declaring_an_app_makes_no_client() -> None:
    """An app module is imported by every command (`conveyor config`, `topics plan`, `acls
    plan` ...): declaring its features must not connect to Kafka (the web UI's aggregator
    used to make the app's producer at once, and it retried an absent cluster for good)."""
    app = App(client_id="quiet", kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.schedules.enable()
    app.web.enable()
    app.recurring("0 0 * * *", lambda: None)

    @app.job()
    def work() -> None:
        pass

    assert app._producers.plain is None
    assert app._admin is None
    assert app.web.aggregator is not None
