"""Configuration from the environment: one precedence (argument > environment > default),
librdkafka settings from ``KAFKA_BOOTSTRAP_SERVERS`` and ``CONVEYOR_KAFKA_*``, a bad value
named by its variable, and ``conveyor config`` showing where each setting came from."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor import App, ConfigurationError
from conveyor.cli.main import cli
from conveyor.environment import APP_VARIABLES, OTHER_VARIABLES
from conveyor.settings import AppSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No variable of the surrounding run (make test exports KAFKA_BOOTSTRAP_SERVERS)."""
    for name in list(os.environ):
        if name.startswith("CONVEYOR_") or name == "KAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.delenv(name)
    return monkeypatch


def test_the_environment_fills_what_the_code_does_not_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka-1:9092,kafka-2:9092")
    monkeypatch.setenv("CONVEYOR_CLIENT_ID", "shop")
    monkeypatch.setenv("CONVEYOR_CONCURRENCY", "12")
    monkeypatch.setenv("CONVEYOR_MAX_WAIT_TIME", "0.5")
    monkeypatch.setenv("CONVEYOR_INSTANCE_ID", "shop-2")
    monkeypatch.setenv("CONVEYOR_INLINE_QUICK_BATCHES", "false")
    monkeypatch.setenv("CONVEYOR_GC_THRESHOLD", "none")
    monkeypatch.setenv("CONVEYOR_KAFKA_SASL_USERNAME", "shop")
    monkeypatch.setenv("CONVEYOR_KAFKA_SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("CONVEYOR_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("CONVEYOR_KAFKA_SASL_MECHANISM", "PLAIN")
    settings = App().settings
    assert settings.client_id == "shop"
    assert settings.concurrency == 12
    assert settings.max_wait_time == 0.5
    assert settings.instance_id == "shop-2"
    assert settings.inline_quick_batches is False
    assert settings.gc_threshold is None
    assert settings.max_messages == AppSettings.max_messages
    assert dict(settings.kafka) == {
        "bootstrap.servers": "kafka-1:9092,kafka-2:9092",
        "sasl.username": "shop",
        "sasl.password": "s3cret",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
    }
    assert settings.sources["concurrency"] == "$CONVEYOR_CONCURRENCY"
    assert settings.sources["max_messages"] == "default"
    assert settings.sources["kafka: bootstrap.servers"] == "$KAFKA_BOOTSTRAP_SERVERS"
    assert settings.sources["kafka: sasl.password"] == "$CONVEYOR_KAFKA_SASL_PASSWORD"
    assert "s3cret" not in repr(settings)


def test_an_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "from-env:9092")
    monkeypatch.setenv("CONVEYOR_CONCURRENCY", "12")
    monkeypatch.setenv("CONVEYOR_CLIENT_ID", "env-name")
    monkeypatch.setenv("CONVEYOR_KAFKA_CLIENT_RACK", "rack-b")
    settings = App(
        "code-name",
        {"bootstrap.servers": "from-code:9092", "client.rack": "rack-a"},
        concurrency=AppSettings.concurrency,  # the default's value, given: still the code's
    ).settings
    assert settings.client_id == "code-name"
    assert settings.concurrency == AppSettings.concurrency
    assert settings.kafka["bootstrap.servers"] == "from-code:9092"
    assert settings.kafka["client.rack"] == "rack-a"
    assert settings.sources["concurrency"] == "argument"
    assert settings.sources["kafka: bootstrap.servers"] == "argument"


def test_kafka_settings_in_code_and_in_the_environment_merge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "from-env:9092")
    settings = App("merged", {"client.rack": "rack-a"}).settings
    assert dict(settings.kafka) == {"bootstrap.servers": "from-env:9092", "client.rack": "rack-a"}


def test_without_a_kafka_anywhere_the_error_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="KAFKA_BOOTSTRAP_SERVERS") as error:
        App("nowhere")
    assert error.value.setting == "bootstrap.servers"


@pytest.mark.parametrize(
    ("variable", "value", "named", "says"),
    [
        ("CONVEYOR_CONCURRENCY", "many", "CONVEYOR_CONCURRENCY", "a whole number"),
        ("CONVEYOR_CONCURRENCY", "0", "concurrency", "from $CONVEYOR_CONCURRENCY"),
        ("CONVEYOR_SHUTDOWN_TIMEOUT", "inf", "CONVEYOR_SHUTDOWN_TIMEOUT", "seconds"),
        ("CONVEYOR_INLINE_QUICK_BATCHES", "maybe", "CONVEYOR_INLINE_QUICK_BATCHES", "true or"),
        ("CONVEYOR_INSTANCE_ID", "a pod/with/slashes", "instance_id", "$CONVEYOR_INSTANCE_ID"),
        ("CONVEYOR_KAFKA_MESSAGE_TIMEOUT_MS", "soon", "message.timeout.ms", "$CONVEYOR_KAFKA_"),
    ],
)
def test_a_bad_value_from_the_environment_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str, says: str
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=says.replace("$", r"\$")) as error:
        App("bad")
    assert error.value.setting == named


def test_two_bootstrap_variables_that_disagree_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "a:9092")
    monkeypatch.setenv("CONVEYOR_KAFKA_BOOTSTRAP_SERVERS", "b:9092")
    with pytest.raises(ConfigurationError, match="disagree"):
        App("two")


def test_every_app_variable_names_a_setting_of_the_app_and_is_on_the_page() -> None:
    fields = set(AppSettings.__dataclass_fields__)
    assert {variable.setting for variable in APP_VARIABLES} <= fields
    names = [variable.name for variable in (*APP_VARIABLES, *OTHER_VARIABLES)]
    assert len(names) == len(set(names))
    page = (Path(__file__).parents[2] / "docs" / "operations" / "configuration.md").read_text()
    missing = [name for name in names if f"`{name.replace('<NAME>', '')}" not in page]
    assert not missing, f"not on the configuration page: {missing}"


def test_conveyor_config_shows_each_setting_and_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    (tmp_path / "configured.py").write_text(
        "from conveyor import App\napp = App('configured', {'client.rack': 'rack-a'}, max_messages=7)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka-1:9092")
    monkeypatch.setenv("CONVEYOR_CONCURRENCY", "9")
    monkeypatch.setenv("CONVEYOR_KAFKA_SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("CONVEYOR_COMMANDS_KEY", "k3y-material-of-32-bytes-at-last")
    monkeypatch.setenv("CONVEYOR_LOG_FORMAT", "json")
    result = CliRunner().invoke(cli, ["config", "--app", "configured:app", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["setting"]: (row["value"], row["source"]) for row in json.loads(result.output)}
    assert rows["client_id"] == ("configured", "argument")
    assert rows["max_messages"] == ("7", "argument")
    assert rows["concurrency"] == ("9", "$CONVEYOR_CONCURRENCY")
    assert rows["shutdown_timeout"] == ("60.0", "default")
    assert rows["kafka: bootstrap.servers"] == ("kafka-1:9092", "$KAFKA_BOOTSTRAP_SERVERS")
    assert rows["kafka: client.rack"] == ("rack-a", "argument")
    assert rows["kafka: sasl.password"] == ("********", "$CONVEYOR_KAFKA_SASL_PASSWORD")
    assert rows["commands key"] == ("********", "$CONVEYOR_COMMANDS_KEY")
    assert rows["CONVEYOR_LOG_FORMAT"] == ("json", "$CONVEYOR_LOG_FORMAT")
    assert rows["CONVEYOR_LOG_LEVEL"] == ("INFO (conveyor web: WARNING)", "default")
    table = CliRunner().invoke(cli, ["config", "--app", "configured:app"])
    assert table.exit_code == 0, table.output
    assert "$CONVEYOR_CONCURRENCY" in table.output
    assert "s3cret" not in table.output + result.output
    assert "k3y-material" not in table.output + result.output
    monkeypatch.setenv("CONVEYOR_COMMANDS_KEY", "short")
    refused = CliRunner().invoke(cli, ["config", "--app", "configured:app", "--json"])
    rows = {row["setting"]: row["value"] for row in json.loads(refused.output)}
    assert rows["commands key"].startswith("refused: CONVEYOR_COMMANDS_KEY must be at least")
    sys.modules.pop("configured", None)


def test_a_swarm_node_gets_ids_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`conveyor swarm` gives its nodes one environment: a StatefulSet pod's instance id and
    static member id would be every node's, and they would fence each other."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("CONVEYOR_INSTANCE_ID", "shop-0")
    monkeypatch.setenv("CONVEYOR_KAFKA_GROUP_INSTANCE_ID", "shop-0")
    assert App("alone").settings.instance_id == "shop-0"
    monkeypatch.setenv("CONVEYOR_SWARM_NODE", "2")
    settings = App("node").settings
    assert settings.instance_id == "shop-0-2"
    assert settings.kafka["group.instance.id"] == "shop-0-2"
    assert settings.sources["instance_id"] == "$CONVEYOR_INSTANCE_ID + swarm node 2"
    assert App("coded", instance_id="mine").settings.instance_id == "mine-2"


def test_the_codes_brokers_make_the_variables_disagreement_moot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "a:9092")
    monkeypatch.setenv("CONVEYOR_KAFKA_BOOTSTRAP_SERVERS", "b:9092")
    assert App("coded", {"bootstrap.servers": "c:9092"}).settings.kafka["bootstrap.servers"] == (
        "c:9092"
    )
