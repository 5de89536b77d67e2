"""What the Admin computes from watermarks (no broker: a fake connection answers the metadata
and watermark requests librdkafka would)."""

from __future__ import annotations

from typing import Any

import pytest

import conveyor.admin.admin as admin_module
from conveyor.admin import Admin, configs
from conveyor.errors import ConfigurationError, KafkaError

WATERMARKS = {("orders", 0): (10, 40), ("orders", 1): (0, 0), ("orders", 2): (5, 35)}


class FakeConnection:
    """Topic ``orders`` with three partitions; no other topic exists."""

    def __init__(self, config: dict[str, Any]) -> None:
        del config

    def metadata(self, topic: str | None, timeout: float) -> dict[str, Any]:
        del timeout
        partitions = {p: {"leader": 1, "replicas": [1], "isrs": [1]} for _, p in WATERMARKS}
        topics = {"orders": {"error": None, "error_name": None, "partitions": partitions}}
        return {"topics": {name: t for name, t in topics.items() if topic in (None, name)}}

    def watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        del timeout
        return WATERMARKS[(topic, partition)]

    def describe_configs(self, kind: str, name: str, timeout: float) -> list[dict[str, Any]]:
        del kind, name, timeout
        return [
            {"name": "retention.ms", "value": "1000", "default": False, "sensitive": False,
             "read_only": False, "source": "DYNAMIC_TOPIC_CONFIG", "synonyms": []},
        ]  # fmt: skip

    def alter_configs(self, *args: Any) -> None:
        raise AssertionError("a refused change must not reach the broker")


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Admin:
    monkeypatch.setattr(admin_module, "AdminConnection", FakeConnection)
    return Admin({"bootstrap.servers": "127.0.0.1:9"})


def test_message_count_sums_the_partitions_watermarks(admin: Admin) -> None:
    assert admin.message_count("orders") == 30 + 0 + 30
    assert admin.message_count("orders") == sum(
        load.messages for load in admin.partition_distribution("orders")
    )


def test_message_count_of_a_topic_not_created_raises(admin: Admin) -> None:
    with pytest.raises(KafkaError, match="nope"):
        admin.message_count("nope")


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({}, "changes"),
        (["retention.ms"], "changes"),
        ({"": "1"}, "changes"),
        ({"retention.ms": ["1"]}, "retention.ms"),
        ({"retention.ms": True}, "retention.ms"),
        ({"retention.mss": "1"}, "retention.mss"),
    ],
)
def test_malformed_config_changes_are_refused_and_named(
    admin: Admin, changes: Any, named: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        admin.alter_configs("topic", "orders", changes)
    assert refused.value.setting == named


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"append": {"retention.ms": ""}}, "retention.ms"),
        ({"append": {"retention.ms": []}}, "retention.ms"),
        ({"subtract": {"retention.ms": [1]}}, "retention.ms"),
        ({"append": ["retention.ms"]}, "append"),
        ({"append": {"retention.mss": "a"}}, "retention.mss"),
        ({"changes": {"retention.ms": "1"}, "subtract": {"retention.ms": "a"}}, "retention.ms"),
        ({"append": {}, "subtract": {}}, "changes"),
    ],
)
def test_malformed_appends_and_subtractions_are_refused_and_named(
    admin: Admin, arguments: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        admin.alter_configs("topic", "orders", **arguments)
    assert refused.value.setting == named


def test_each_change_goes_to_the_broker_with_its_operation() -> None:
    current = {"a": configs.ConfigValue("a", "x", False, False, False, "DYNAMIC_TOPIC_CONFIG", [])}
    current |= {name: current["a"] for name in ("b", "c", "d")}
    assert configs.check_changes(
        "topic", "t", {"a": "1", "b": None}, current,
        append={"c": ["p", "q,r"]}, subtract={"d": " s "},
    ) == {
        "a": ("set", "1"), "b": ("delete", None), "c": ("append", "p,q,r"),
        "d": ("subtract", "s"),
    }  # fmt: skip
    listed = configs.ConfigValue("c", "delete,compact", False, False, False, "X", [])
    assert configs.shows(listed, "append", "compact", "topic")
    assert not configs.shows(listed, "subtract", "compact", "topic")
    assert configs.shows(listed, "subtract", "other", "topic")


def entry(value: str, source: str, synonyms: list[tuple[str, str | None]]) -> Any:
    return configs.ConfigValue(
        "log.cleaner.backoff.ms", value, source == "DEFAULT_CONFIG", False, False, source, synonyms
    )


def test_a_reset_shows_once_the_default_is_in_force_not_just_the_source() -> None:
    """A broker drops a deleted override from its metadata before it applies the default."""
    default = [("log.cleaner.backoff.ms", "15000")]
    assert not configs.reset(entry("15001", "DYNAMIC_BROKER_CONFIG", default), "broker")
    assert not configs.reset(entry("15001", "DEFAULT_CONFIG", default), "broker"), "stale"
    assert configs.reset(entry("15000", "DEFAULT_CONFIG", default), "broker")
    assert configs.reset(entry("4", "STATIC_BROKER_CONFIG", [("n", "8")]), "broker")
    assert not configs.reset(entry("1", "DYNAMIC_TOPIC_CONFIG", []), "topic")
