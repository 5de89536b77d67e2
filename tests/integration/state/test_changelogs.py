"""The stores' changelog topics on the real broker: ``conveyor topics plan | migrate`` list and
create them (compacted, with their topic's partition count), and an app whose changelog has
another partition count than its topic refuses to start, naming both."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor import Admin, App, ConfigurationError, Consumer
from conveyor.cli.main import cli
from conveyor.state import Store, changelog_topic


class Noop(Consumer):
    def consume(self) -> None:
        pass


def test_plan_and_migrate_create_each_store_s_compacted_changelog(
    tmp_path: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    stem = uuid.uuid4().hex[:8]
    topic, group = f"clicks-{stem}", f"clicks-{stem}"
    module = f"stateful_{stem}"
    (tmp_path / f"{module}.py").write_text(
        "from conveyor import App, Consumer\n"
        "from conveyor.state import Store\n\n"
        "class Noop(Consumer):\n    def consume(self):\n        pass\n\n"
        f"app = App(client_id={group!r}, kafka={{'bootstrap.servers': {kafka_bootstrap!r}}})\n"
        f"app.routes.topic({topic!r}, Noop, partitions=3,\n"
        "                 state={'counts': Store(), 'local': Store(changelog=False)})\n"
    )
    changelog = changelog_topic(group, topic, "counts")
    try:
        planned = CliRunner().invoke(cli, ["topics", "plan", "--app", f"{module}:app", "--json"])
        assert planned.exit_code == 0, planned.output
        creations = {c["topic"]: c for c in json.loads(planned.output) if c["kind"] == "create"}
        assert set(creations) == {topic, changelog}, "a store without a changelog has none"
        assert creations[changelog]["partitions"] == 3
        assert "cleanup.policy=compact" in creations[changelog]["detail"]
        migrated = CliRunner().invoke(cli, ["topics", "migrate", "--app", f"{module}:app"])
        assert migrated.exit_code == 0, migrated.output
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            assert admin.topic_info(changelog).partition_count == 3
            config = admin.describe_configs("topic", changelog)
            assert config["cleanup.policy"].value == "compact"
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            for name in (topic, changelog):
                if name in admin.list_topics():
                    admin.delete_topic(name)
        sys.modules.pop(module, None)


def test_a_changelog_with_another_partition_count_stops_the_start(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    changelog = changelog_topic(group, topic, "default")
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        admin.create_topic(changelog, 1, config={"cleanup.policy": "compact"})
    try:
        app = App(
            client_id="c",
            kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group},
            state_dir=tmp_path,
        )
        app.routes.topic(topic, Noop, state=Store(backend="memory"))
        with pytest.raises(ConfigurationError, match="has 1 partitions and its topic 2") as refused:
            app.start()
        assert refused.value.setting == "state"
        assert app.state == "idle"
    finally:
        with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.delete_topic(changelog)
