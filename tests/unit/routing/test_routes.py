"""Route options are checked when declared, and a bad one is named."""

from __future__ import annotations

import re
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer


class Noop(Consumer):
    def consume(self) -> None:
        pass


def routes() -> Any:
    return App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"}).routes


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"dead_letter_queue": {"max_retries": 1}}, "topic"),
        ({"dead_letter_queue": {"topic": "dlq", "max_retries": -1}}, "max_retries"),
        ({"dead_letter_queue": {"topic": "dlq", "dispatch_method": "fax"}}, "dispatch_method"),
        ({"dead_letter_queue": {"topic": "dlq", "colour": "red"}}, "colour"),
        ({"dead_letter_queue": {"topic": "orders"}}, "topic"),
        ({"pause_timeout": 0}, "pause_timeout"),
        ({"pause_with_exponential_backoff": "yes"}, "pause_with_exponential_backoff"),
        ({"initial_offset": "middle"}, "initial_offset"),
        ({"assign": [-1]}, "assign"),
    ],
)
def test_bad_route_options_are_named(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        routes().topic("orders", Noop, **options)
    assert raised.value.setting == named


def test_an_unknown_option_is_named_at_run_time_typed_or_not() -> None:
    """The typed options (conveyor.routing.options) check nothing at run time: the route does,
    as before, for code that mypy does not see."""
    with pytest.raises(ConfigurationError, match="unknown option 'max_mesages'; known: ") as raised:
        routes().topic("orders", Noop, max_mesages=5)
    assert raised.value.setting == "max_mesages"


def _keys(typed: Any) -> set[str]:
    return set(typed.__required_keys__ | typed.__optional_keys__)


def test_the_typed_options_are_the_options_a_route_takes() -> None:
    """Each TypedDict names exactly what its kind of route accepts, so that mypy refuses no
    option the route takes and accepts none it refuses."""
    from conveyor.routing import dead_letter_queue, virtual_partitions  # noqa: PLC0415
    from conveyor.routing import routes as table  # noqa: PLC0415
    from conveyor.routing.options import (  # noqa: PLC0415
        DeadLetterQueueOptions,
        DeclaredTopicOptions,
        PatternOptions,
        RouteOptions,
        SinkOptions,
        TopicOptions,
        VirtualPartitionsOptions,
    )

    assert _keys(TopicOptions) == set(table._OPTIONS)
    declarative = {"assign", "partitions", "replication_factor", "config"}
    named_topics_only = {"state", "window", "tables"}  # changelogs, tables: for a topic named ahead
    assert _keys(PatternOptions) == set(table._OPTIONS) - declarative - named_topics_only
    assert _keys(DeclaredTopicOptions) == _keys(RouteOptions) | declarative
    set_by_a_sink = {"max_messages", "virtual_partitions", "dead_letter_queue", "filters"}
    assert _keys(DeclaredTopicOptions) == set(table._OPTIONS) - set_by_a_sink - named_topics_only
    assert _keys(SinkOptions) - _keys(DeclaredTopicOptions) == {
        "batch_interval", "max_batch", "lanes", "ordering", "retries", "dead_letter_queue",
        "max_in_flight",
    }  # fmt: skip
    assert _keys(DeadLetterQueueOptions) == set(dead_letter_queue._KEYS)
    assert _keys(VirtualPartitionsOptions) == set(virtual_partitions._KEYS)


def test_a_pattern_route_matches_topics_by_regex() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    route = app.routes.pattern(r"orders\..+", Noop)  # the ^ librdkafka needs is added
    assert route.name == r"^orders\..+"
    assert route.matches("orders.eu")
    assert not route.matches("old-orders.eu")
    assert not route.matches("orders")
    assert app.routes.topic("payments", Noop).matches("payments")
    compiled = app.routes.pattern(re.compile(r"^audit-\d+$"), Noop)
    assert compiled.matches("audit-7")


@pytest.mark.parametrize(
    ("regex", "options", "named"),
    [
        ("orders(", {}, "pattern"),
        ("^$", {}, "pattern"),
        (r"orders\..+", {"assign": [0]}, "assign"),
        (r"orders\..+", {"partitions": 3}, "partitions"),
        (r"orders\..+", {"config": {"retention.ms": "1"}}, "config"),
        (r"orders\..+", {"max_messages": 0}, "max_messages"),
    ],
)
def test_a_bad_pattern_route_is_refused_and_named(
    regex: str, options: dict[str, Any], named: str
) -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ConfigurationError) as refused:
        app.routes.pattern(regex, Noop, **options)
    assert refused.value.setting == named


@pytest.mark.parametrize(
    ("kafka", "named"),
    [
        ({"fetch.wait.max.msx": 10}, "fetch.wait.max.msx"),
        ({"group.id": "other"}, "group.id"),
        ({"enable.auto.commit": True}, "enable.auto.commit"),
        ({"auto.offset.reset": "latest"}, "auto.offset.reset"),
        ({"error_cb": print}, "error_cb"),
        ({"session.timeout.ms": "soon"}, "session.timeout.ms"),
        ("isolation.level=read_uncommitted", "kafka"),
    ],
)
def test_a_routes_own_kafka_settings_are_checked_when_declared(kafka: Any, named: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        routes().topic("orders", Noop, kafka=kafka)
    assert refused.value.setting == named


def test_a_routes_own_settings_are_checked_with_the_apps_when_it_starts() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": 2_000_000})
    app.routes.topic("orders", Noop, kafka={"fetch.max.bytes": 1_500_000})  # fine alone
    with pytest.raises(ConfigurationError) as refused:
        app.start()
    assert "fetch.max.bytes" in str(refused.value)


def test_a_pattern_may_not_read_its_own_dead_letters() -> None:
    with pytest.raises(ConfigurationError) as refused:
        routes().pattern(r"^orders\..+$", Noop, dead_letter_queue={"topic": "orders.dlq"})
    assert refused.value.setting == "dead_letter_queue"


def test_a_pattern_and_a_named_route_it_matches_must_share_a_listener() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.routes.pattern(r"^orders\..+$", Noop)
    with app.routes.subscription_group("other"):
        app.routes.topic("orders.eu", Noop)
    with pytest.raises(ConfigurationError) as refused:
        app.start()
    assert refused.value.setting == "pattern"
    assert "orders.eu" in str(refused.value)


def test_assigned_and_subscribed_topics_may_not_share_a_consumer_group() -> None:
    """Kafka would refuse the assigned partitions' commits while the group has members."""
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "shop"})
    app.routes.topic("orders", Noop, assign=[0])
    app.routes.topic("payments", Noop, assign=[1, 2])
    app.routes.topic("audit", Noop)
    with pytest.raises(ConfigurationError) as refused:
        app.start()
    assert refused.value.setting == "assign"
    assert "consumer group 'shop'" in str(refused.value)
    assert "(orders, payments)" in str(refused.value)
    assert "(audit)" in str(refused.value)


def test_assigned_topics_of_several_topics_in_a_group_of_their_own_are_fine() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "shop"})
    app.routes.topic("audit", Noop)
    with app.routes.consumer_group("shop-assigned"):
        app.routes.topic("orders", Noop, assign=[0])
        app.routes.topic("payments", Noop, assign=[1, 2])
    app.routes.validate()


def test_a_transactional_dlq_stays_on_the_apps_cluster() -> None:
    with pytest.raises(ConfigurationError) as refused:
        routes().topic(
            "clicks", Noop, kafka={"bootstrap.servers": "elsewhere:9092"},
            dead_letter_queue={"topic": "clicks_dlq", "transactional": True},
        )  # fmt: skip
    assert refused.value.setting == "transactional"
