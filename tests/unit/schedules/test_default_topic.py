"""An app's schedules topic is its own unless it names one: ``<group>_schedules`` after its
consumer group (``conveyor_schedules`` for an app with the default name, as every app's was
before), and the app's producers write scheduled messages and cancellations there."""

from __future__ import annotations

import pytest

from conveyor import App, Producer, testing
from conveyor.errors import ConfigurationError
from conveyor.schedules.wire import DEFAULT_TOPIC, app_topic


def new_app(client_id: str | None = None, **kafka: str) -> App:
    settings = {"bootstrap.servers": "127.0.0.1:1", **kafka}
    if client_id is None:
        return App(kafka=settings)
    return App(client_id=client_id, kafka=settings)


def test_two_apps_named_apart_have_schedules_topics_apart() -> None:
    shop, billing = new_app("shop"), new_app("billing")
    assert shop.schedules.topic == "shop_schedules"
    assert billing.schedules.topic == "billing_schedules"
    shop.schedules.enable()
    billing.schedules.enable()
    assert [r.name for r in shop.routes] == ["shop_schedules"]
    assert [r.name for r in billing.routes] == ["billing_schedules"]


def test_the_consumer_group_names_the_topic_and_the_default_name_keeps_the_old_one() -> None:
    assert new_app("shop", **{"group.id": "shop-eu"}).schedules.topic == "shop-eu_schedules"
    assert new_app().schedules.topic == DEFAULT_TOPIC == "conveyor_schedules"


def test_a_topic_named_in_enable_wins() -> None:
    app = new_app("shop")
    app.schedules.enable(topic="conveyor_schedules")  # an upgrade that keeps the old topic
    assert app.schedules.topic == "conveyor_schedules"
    assert [r.name for r in app.routes] == ["conveyor_schedules"]
    with pytest.raises(ConfigurationError, match="topic"):
        new_app("billing").schedules.enable(topic="")


@pytest.mark.parametrize(
    ("group", "topic"),
    [("shop", "shop_schedules"), ("team a/shop:1", "team_a_shop_1_schedules")],
)
def test_a_group_becomes_a_legal_topic_name(group: str, topic: str) -> None:
    assert app_topic(group) == topic


def test_a_group_too_long_for_a_topic_name_is_cut_and_told_apart_by_a_hash() -> None:
    first, second = app_topic("g" * 300), app_topic("g" * 299 + "h")
    assert len(first) == len(second) == 249
    assert first != second
    assert first.endswith("_schedules")


def test_the_apps_producers_write_schedules_to_its_topic_unless_told_otherwise() -> None:
    app = new_app("shop")
    testing.clear(app)  # the app's producers capture: no broker
    early = app.producer  # made before enable() names another topic: it follows
    app.schedules.enable(topic="shop-timers")
    assert early.schedules_topic == "shop-timers"
    schedule = app.producer.produce_at(4_000_000_000, topic="orders", payload=b"x")
    app.producer.cancel_scheduled(schedule)
    app.producer.produce_at(4_000_000_000, topic="orders", schedules_topic="elsewhere")
    assert [m.key for m in testing.produced(app, "shop-timers")] == [schedule, schedule]
    assert len(testing.produced(app, "elsewhere")) == 1
    assert app.transactional_producer.schedules_topic == "shop-timers"


def test_a_producer_of_no_app_keeps_the_shared_default() -> None:
    assert Producer.schedules_topic == "conveyor_schedules"  # what a Producer(...) writes to
