"""`conveyor topics|groups|configs|cluster` against the real broker, through click's runner:
a plan on an empty cluster lists creations, migrate creates, a changed retention plans exactly
that change and align applies it, partitions grow but never shrink."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conveyor import Admin, Producer
from conveyor.cli.main import cli

AppWriter = Callable[..., str]


@pytest.fixture
def declared(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[AppWriter, list[str]]]:
    """Write app modules declaring two fresh topics; returns (writer, topic names)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    stem = uuid.uuid4().hex[:8]
    names = [f"declared-{stem}-orders", f"declared-{stem}-audit"]

    def write(partitions: int = 2, retention: str = "86400000") -> str:
        module = f"declared_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{module}.py").write_text(
            "from conveyor import App, Consumer\n\n"
            "class Noop(Consumer):\n    def consume(self):\n        pass\n\n"
            f"app = App(client_id='declared', kafka={{'bootstrap.servers': {kafka_bootstrap!r}}})\n"
            f"app.routes.topic({names[0]!r}, Noop, partitions={partitions}, config={{'retention.ms': {retention!r}}})\n"
            f"app.routes.topic({names[1]!r}, Noop)\n"
        )
        return f"{module}:app"

    yield write, names
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        for name in names:
            if name in admin.list_topics():
                admin.delete_topic(name)
    for module in [m for m in sys.modules if m.startswith("declared_")]:
        del sys.modules[module]


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def test_plan_migrate_align_and_partitions(declared: tuple[AppWriter, list[str]]) -> None:
    write, (orders, audit) = declared
    app = write()

    planned = run("topics", "plan", "--app", app)
    assert planned.exit_code == 0, planned.output
    assert "+" in planned.output
    assert orders in planned.output
    assert audit in planned.output
    assert "create with 2 partition(s), replication factor 1 (the cluster's default)" in (
        planned.output
    )  # the development broker's default.replication.factor
    assert "one replica" not in planned.output  # a warning only from three brokers on

    migrated = run("topics", "migrate", "--app", app)
    assert migrated.exit_code == 0, migrated.output
    assert migrated.output.count("done") == 2
    assert "nothing to do" in run("topics", "plan", "--app", app).output

    longer = write(retention="186400000")
    changes = json.loads(run("topics", "plan", "--app", longer, "--json").output)
    assert [
        (c["symbol"], c["topic"], c["setting"], c["current"], c["wanted"]) for c in changes
    ] == [("~", orders, "retention.ms", "86400000", "186400000")]
    assert run("topics", "align", "--app", longer).exit_code == 0
    assert "nothing to do" in run("topics", "plan", "--app", longer).output

    grown = write(partitions=4, retention="186400000")
    assert "partitions: 2 => 4" in run("topics", "plan", "--app", grown).output
    assert run("topics", "migrate", "--app", grown).exit_code == 0
    shrunk = write(partitions=3, retention="186400000")
    plan_shrink = json.loads(run("topics", "plan", "--app", shrunk, "--json").output)
    assert [(c["symbol"], c["kind"]) for c in plan_shrink] == [("!", "impossible")]
    result = json.loads(run("topics", "migrate", "--app", shrunk, "--json").output)
    assert result[0]["applied"] is False
    described = json.loads(run("topics", "describe", orders, "--app", shrunk, "--json").output)
    assert len(described["partitions"]) == 4, "nothing was removed"
    assert described["configs"]["retention.ms"] == "186400000"


def test_direct_topic_commands_and_listings(
    declared: tuple[AppWriter, list[str]], kafka_bootstrap: str
) -> None:
    write, (orders, _audit) = declared
    app = write()
    assert (
        run(
            "topics",
            "create",
            orders,
            "--partitions",
            "2",
            "--config",
            "retention.ms=1000000",
            "--app",
            app,
        ).exit_code
        == 0
    )
    listed = json.loads(run("topics", "list", "--app", app, "--json").output)
    assert {"topic": orders, "partitions": 2} in listed
    assert run("topics", "repartition", orders, "3", "--app", app).exit_code == 0
    described = json.loads(run("topics", "describe", orders, "--app", app, "--json").output)
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert "partition" in run("topics", "describe", orders, "--app", app).output

    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": orders, "payload": b"x", "partition": 0} for _ in range(4)]
        )
    group = f"cli-{uuid.uuid4().hex[:6]}"
    sought = run("groups", "seek", group, orders, "1", "--partition", "0", "--yes", "--app", app)
    assert sought.exit_code == 0, sought.output
    lags = json.loads(run("groups", "lags", group, "--app", app, "--json").output)
    assert [(lag["partition"], lag["committed"], lag["lag"]) for lag in lags] == [
        (0, 1, 3), (1, None, 0), (2, None, 0),
    ]  # fmt: skip
    assert group in run("groups", "list", "--app", app).output
    described = run("groups", "describe", group, "--app", app)
    assert described.exit_code == 0, described.output
    assert f"Group {group} (EMPTY)" in described.output, "a group with offsets and no members"
    as_json = json.loads(run("groups", "describe", group, "--app", app, "--json").output)
    assert as_json == {"group": group, "state": "EMPTY", "members": []}

    topic_configs = json.loads(
        run("configs", "describe", "topic", orders, "--app", app, "--json").output
    )
    assert {"name": "retention.ms", "value": "1000000"}.items() <= next(
        c for c in topic_configs if c["name"] == "retention.ms"
    ).items()
    cluster = json.loads(run("cluster", "info", "--app", app, "--json").output)
    broker_configs = run(
        "configs", "describe", "broker", str(cluster["brokers"][0]["id"]), "--app", app
    )
    assert "auto.create.topics.enable" in broker_configs.output

    refused = CliRunner().invoke(cli, ["topics", "delete", orders, "--app", app], input=None)
    assert refused.exit_code != 0, "no terminal and no --yes: refused"
    assert orders in json.dumps(json.loads(run("topics", "list", "--app", app, "--json").output))
    assert run("topics", "delete", orders, "--yes", "--app", app).exit_code == 0
    assert orders not in run("topics", "list", "--app", app).output


def test_reset_recreates_declared_topics_empty(
    declared: tuple[AppWriter, list[str]], kafka_bootstrap: str
) -> None:
    write, (orders, audit) = declared
    app = write()
    assert run("topics", "migrate", "--app", app).exit_code == 0
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(topic=orders, payload=b"old data", partition=0)
    assert run("topics", "reset", "--app", app).exit_code != 0, "refused without --yes"
    reset = run("topics", "reset", "--yes", "--app", app)
    assert reset.exit_code == 0, reset.output
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        assert admin.read_watermark_offsets(orders, 0) == (0, 0)
        assert admin.topic_info(orders).partition_count == 2
        assert audit in admin.list_topics()


def test_a_value_kafka_refuses_fails_migrate_clearly(declared: tuple[AppWriter, list[str]]) -> None:
    write, (orders, _audit) = declared
    assert run("topics", "migrate", "--app", write()).exit_code == 0
    broken = write(retention="forever")
    result = run("topics", "migrate", "--app", broken)
    assert result.exit_code == 1
    assert "failed" in result.output
    assert orders in result.output


def test_describing_a_group_that_does_not_exist_fails(
    declared: tuple[AppWriter, list[str]],
) -> None:
    write, _ = declared
    result = run("groups", "describe", "--app", write(), f"nobody-{uuid.uuid4().hex[:8]}")
    assert result.exit_code == 1
    assert "there is no consumer group" in result.output


def test_commands_that_need_no_routes_need_no_app(
    kafka_bootstrap: str, kafka_admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`conveyor topics create` and friends take the cluster from KAFKA_BOOTSTRAP_SERVERS when
    no app is given; commands that read the routes still ask for one."""
    monkeypatch.delenv("CONVEYOR_APP", raising=False)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    name = f"test-no-app-{uuid.uuid4().hex[:8]}"
    created = run("topics", "create", name, "--partitions", "2")
    assert created.exit_code == 0, created.output
    try:
        listed = json.loads(run("topics", "list", "--json").output)
        assert {"topic": name, "partitions": 2} in listed
    finally:
        kafka_admin.delete_topic(name)
    planned = run("topics", "plan")
    assert planned.exit_code != 0
    assert "no app given" in planned.output
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    refused = run("topics", "list")
    assert refused.exit_code != 0
    assert "KAFKA_BOOTSTRAP_SERVERS" in refused.output


@pytest.mark.xdist_group("docs")  # see tests/conftest.py
def test_configs_alter_sets_and_resets_a_dynamic_broker_config(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``log.cleaner.backoff.ms``: the cleaner's idle pause, harmless to the shared broker."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    key = "log.cleaner.backoff.ms"
    broker = str(json.loads(run("cluster", "info", "--json").output)["brokers"][0]["id"])

    def current() -> dict[str, str]:
        described = run("configs", "describe", "broker", broker, "--all", "--json").output
        return next(entry for entry in json.loads(described) if entry["name"] == key)

    start = current()
    wanted = str(int(start["value"]) + 1)
    try:
        altered = run("configs", "alter", "broker", broker, f"{key}={wanted}")
        assert altered.exit_code == 0, altered.output
        assert f"broker {broker} configs altered" in altered.output
        row = next(line for line in altered.output.splitlines() if key in line)
        assert [cell.strip() for cell in row.strip("│ ").split("│")] == [
            key, start["value"], wanted, "DYNAMIC_BROKER_CONFIG",
        ]  # fmt: skip
        assert (current()["value"], current()["source"]) == (wanted, "DYNAMIC_BROKER_CONFIG")
    finally:
        reset = run("configs", "alter", "broker", broker, "--reset", key, "--json")
    assert reset.exit_code == 0, reset.output
    assert json.loads(reset.output) == [
        {"name": key, "before": wanted, "after": start["value"], "source": start["source"]}
    ]

    unknown = CliRunner().invoke(
        cli, ["configs", "alter", "broker", broker, "log.cleaner.bakoff.ms=1"]
    )
    assert unknown.exit_code == 1
    assert "no config 'log.cleaner.bakoff.ms'" in unknown.output
    read_only = CliRunner().invoke(cli, ["configs", "alter", "broker", broker, "node.id=7"])
    assert read_only.exit_code == 1
    assert "'node.id' is read-only" in read_only.output
    malformed = CliRunner().invoke(cli, ["configs", "alter", "broker", broker, key])
    assert malformed.exit_code == 2
    assert f"'{key}' is not KEY=VALUE" in malformed.output
    nothing = CliRunner().invoke(cli, ["configs", "alter", "broker", broker])
    assert nothing.exit_code == 2
    assert current()["source"] == start["source"], "refused changes never reached the broker"


def test_configs_alter_appends_to_and_subtracts_from_a_list_config(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cleanup.policy`` is a list: --append adds ``compact`` beside the default ``delete``,
    --subtract takes it away again, each leaving the list's other item as it was."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    topic = new_topic()

    def policy() -> list[str]:
        value = kafka_admin.describe_configs("topic", topic)["cleanup.policy"].value or ""
        return sorted(value.split(","))

    assert policy() == ["delete"]
    appended = run("configs", "alter", "topic", topic, "--append", "cleanup.policy=compact")
    assert appended.exit_code == 0, appended.output
    assert policy() == ["compact", "delete"]
    row = next(line for line in appended.output.splitlines() if "cleanup.policy" in line)
    assert [cell.strip() for cell in row.strip("│ ").split("│")][:3] == [
        "cleanup.policy", "delete", "delete,compact",
    ]  # fmt: skip
    subtracted = run(
        "configs", "alter", "topic", topic, "--subtract", "cleanup.policy=delete", "--json"
    )
    assert subtracted.exit_code == 0, subtracted.output
    assert policy() == ["compact"]
    assert json.loads(subtracted.output) == [
        {"name": "cleanup.policy", "before": "delete,compact", "after": "compact",
         "source": "DYNAMIC_TOPIC_CONFIG"}
    ]  # fmt: skip

    # a config that is no list: Kafka refuses, naming it; the value stays
    refused = CliRunner().invoke(
        cli, ["configs", "alter", "topic", topic, "--append", "retention.ms=5"]
    )
    assert refused.exit_code == 1
    assert "retention.ms" in refused.output
    twice = CliRunner().invoke(
        cli, ["configs", "alter", "topic", topic, "--append", "cleanup.policy=delete",
              "--subtract", "cleanup.policy=compact"],
    )  # fmt: skip
    assert twice.exit_code == 2
    assert "'cleanup.policy' is changed twice" in twice.output
    assert policy() == ["compact"]


def test_topics_alter_grows_partitions_and_changes_configs(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`conveyor topics alter NAME`: the command a Karafka user looks for to change one
    topic (partitions up, configs set, reset, appended to), refusing to shrink it."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    topic = new_topic(partitions=2, config={"retention.ms": "86400000"})
    altered = run(
        "topics", "alter", topic, "--partitions", "4", "--config", "max.message.bytes=2000000",
        "--reset", "retention.ms", "--append", "cleanup.policy=compact", "--json",
    )  # fmt: skip
    assert altered.exit_code == 0, altered.output
    done = json.loads(altered.output)
    assert done["partitions"] == {"before": 2, "after": 4}
    after = {change["name"]: change["after"] for change in done["configs"]}
    assert after.keys() == {"max.message.bytes", "retention.ms", "cleanup.policy"}
    assert (after["max.message.bytes"], after["cleanup.policy"]) == ("2000000", "delete,compact")
    assert kafka_admin.topic_info(topic).partition_count == 4
    configs = kafka_admin.describe_configs("topic", topic)
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["retention.ms"].default, "the override deleted"
    assert configs["cleanup.policy"].value == "delete,compact"

    same = run("topics", "alter", topic, "--partitions", "4")
    assert same.exit_code == 0, same.output
    assert "4 partitions (unchanged)" in same.output
    shrink = CliRunner().invoke(cli, ["topics", "alter", topic, "--partitions", "3"])
    assert shrink.exit_code == 2
    assert "Kafka cannot shrink a topic" in shrink.output
    assert kafka_admin.topic_info(topic).partition_count == 4
    nothing = CliRunner().invoke(cli, ["topics", "alter", topic])
    assert nothing.exit_code == 2
    assert "nothing to change" in nothing.output
