"""The connect runtime's pure parts: fields parse Connect's string values and report each
error as Connect words it, plugins are found by alias, class name or import path, the
workers' topics' records read back into configurations and statuses, tasks take slots."""

from __future__ import annotations

from collections import Counter

import pytest

from conveyor.connect.runtime import Field, Plugins, SinkConnector
from conveyor.connect.runtime.builtin import FileSinkConnector
from conveyor.connect.runtime.cluster import Configs, Restart, Statuses, keys
from conveyor.connect.runtime.definitions import config_infos, field_errors, parse_config
from conveyor.connect.runtime.membership import slot_of
from conveyor.connect.runtime.plugins import SourceOffsets, class_path
from conveyor.errors import ConfigurationError


def test_fields_parse_connect_s_strings() -> None:
    fields = [
        Field("n", "INT", "a number", default="3"),
        Field("on", "BOOLEAN", "a flag", default="false"),
        Field("topics", "LIST", "names", default=""),
        Field("ratio", "DOUBLE", "a ratio", default="0.5"),
    ]
    parsed = parse_config(fields, {"n": " 7 ", "on": "TRUE", "topics": "a, b,,c", "extra": "x"})
    assert parsed == {"n": 7, "on": True, "topics": ["a", "b", "c"], "ratio": 0.5, "extra": "x"}


def test_every_field_error_is_reported_as_connect_words_it() -> None:
    errors = FileSinkConnector.errors({"connector.class": "FileStreamSink", "tasks.max": "0"})
    assert errors == {
        "name": ['Missing required configuration "name" which has no default value.'],
        "tasks.max": ["Invalid value 0 for configuration tasks.max: Value must be at least 1"],
        "file": ['Missing required configuration "file" which has no default value.'],
    }
    # across fields only once every field parsed: a sink needs topics
    assert FileSinkConnector.errors(
        {"name": "x", "connector.class": "FileStreamSink", "file": "/tmp/x"}
    ) == {"topics": ["Must configure one of topics or topics.regex"]}
    assert field_errors([Field("b", "BOOLEAN", "")], {"b": "yes"}) == {
        "b": ["Invalid value yes for configuration b: Expected value to be either true or false"]
    }


def test_validation_answers_connect_s_config_infos() -> None:
    fields = FileSinkConnector.all_fields()
    config = {"connector.class": "FileStreamSink", "name": "x", "topics": "t"}
    infos = config_infos("FileSink", fields, config, FileSinkConnector.errors(config))
    assert infos["name"] == "FileSink"
    assert infos["error_count"] == 1
    assert infos["groups"] == ["Common", "Error Handling"]
    by_name = {c["definition"]["name"]: c for c in infos["configs"]}
    assert by_name["file"]["value"]["errors"] == [
        'Missing required configuration "file" which has no default value.'
    ]
    assert by_name["tasks.max"]["definition"]["default_value"] == "1"
    assert by_name["topics"]["value"]["value"] == "t"


def test_plugins_are_found_by_alias_class_name_or_import_path() -> None:
    plugins = Plugins()
    for name in (
        "FileStreamSink",
        "FileSinkConnector",
        "FileSink",
        "conveyor.connect.runtime.builtin.FileSinkConnector",
    ):
        assert plugins.find(name) is FileSinkConnector
    assert "FileSourceConnector" in [p.__name__ for p in plugins.classes()]
    with pytest.raises(ConfigurationError, match="NoSuch") as missing:
        plugins.find("NoSuch")
    assert class_path(FileSinkConnector) in str(missing.value)
    with pytest.raises(ConfigurationError):
        plugins.find("collections.Counter")  # importable, but no connector


def test_a_plugin_s_own_fields_come_after_the_common_ones() -> None:
    class Rows(SinkConnector):
        fields = (Field("table", "STRING", "where rows go", required=True),)

    names = [field.name for field in Rows.all_fields()]
    assert names[:3] == ["name", "connector.class", "tasks.max"]
    assert names[-1] == "table"
    assert Rows().task_configs({"name": "r"}, 3) == [{"name": "r"}] * 3


def test_the_config_topic_reads_back_into_configurations_targets_and_restarts() -> None:
    configs = Configs()
    configs.apply(keys.connector("a-b"), {"properties": {"tasks.max": 2, "name": "a-b"}})
    configs.apply(keys.target("a-b"), {"state": "PAUSED"})
    configs.apply(keys.restart_connector("a-b"), {"include-tasks": True, "only-failed": True})
    configs.apply(keys.restart_task("a-b", 1), {"id": "x"})
    assert configs.names() == ["a-b"]
    assert configs.config("a-b") == {"tasks.max": "2", "name": "a-b"}
    assert configs.target("a-b") == "PAUSED"
    assert configs.take_restarts() == [
        Restart("a-b", include_tasks=True, only_failed=True),
        Restart("a-b", task=1),
    ]
    assert configs.take_restarts() == []
    configs.apply(keys.connector("a-b"), None)
    assert configs.names() == []
    assert configs.target("a-b") == "STARTED", "a deleted connector's target goes with it"


def test_the_status_topic_reads_back_per_connector_and_task() -> None:
    statuses = Statuses()
    statuses.apply(keys.connector_status("c-1"), {"state": "RUNNING", "worker_id": "w:1"})
    statuses.apply(keys.task_status("c-1", 0), {"state": "FAILED", "trace": "t"})
    statuses.apply(keys.task_status("c-1", 10), {"state": "RUNNING"})
    assert statuses.connector("c-1") == {"state": "RUNNING", "worker_id": "w:1"}
    assert statuses.tasks("c-1") == {0: {"state": "FAILED", "trace": "t"}, 10: {"state": "RUNNING"}}
    statuses.apply(keys.task_status("c-1", 0), None)
    assert list(statuses.tasks("c-1")) == [10]


def test_a_connector_s_tasks_take_consecutive_slots_that_spread_over_workers() -> None:
    slots = [slot_of("orders", task, 24) for task in range(4)]
    assert slots == [(slots[0] + task) % 24 for task in range(4)]
    spread = Counter(slot_of(f"connector-{n}", 0, 24) for n in range(240))
    assert len(spread) == 24, "every slot used by some connector"


def test_source_offsets_are_found_by_their_partition_whatever_its_key_order() -> None:
    offsets = SourceOffsets({'{"db":"shop","table":"orders"}': {"lsn": 42}})
    assert offsets.get({"table": "orders", "db": "shop"}) == {"lsn": 42}
    assert offsets.get({"table": "customers", "db": "shop"}) is None


def test_the_built_in_sinks_are_plugins_and_a_broadcast_serves_one_topic() -> None:
    from conveyor.connect.runtime.builtin import BroadcastSinkConnector  # noqa: PLC0415

    names = {plugin.__name__ for plugin in Plugins().classes()}
    assert {
        "FileSinkConnector",
        "JsonLinesSinkConnector",
        "WebhookSinkConnector",
        "PostgresSinkConnector",
        "BroadcastSinkConnector",
    } <= names
    errors = BroadcastSinkConnector.errors(
        {"name": "b", "connector.class": "BroadcastSink", "topics": "a,b", "port": "8765"}
    )
    assert errors == {"topics": ["A broadcast serves one topic on its port: name one"]}


def test_an_http_url_needs_a_scheme_and_a_host() -> None:
    from conveyor.connect.runtime import http_url  # noqa: PLC0415

    assert http_url("https://api.example.com/orders?page=1") is None
    assert http_url("http://127.0.0.1:8080/") is None
    for wrong in ("http://", "ftp://host/x", "example.com/x", "http://host:port/"):
        assert http_url(wrong) == "Value must be an http:// or https:// URL", wrong
    webhook = Plugins().find("WebhookSink")
    config = {"connector.class": "WebhookSink", "name": "w", "topics": "t", "url": "http://"}
    errors = field_errors(webhook.all_fields(), config)
    assert errors == {
        "url": ["Invalid value http:// for configuration url: Value must be an http:// or "
                "https:// URL"]
    }  # fmt: skip
