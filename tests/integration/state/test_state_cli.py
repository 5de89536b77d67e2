"""``conveyor state``: the stores listed with their changelogs and this host's copies, a key
read from its changelog, and a local copy deleted for a rebuild (refused while a process of the
app runs on the host, allowed once it stopped)."""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor import Admin, Producer
from conveyor.cli.main import cli
from helpers import ServerProcess, conveyor_argv

APP = """
from conveyor import App, Consumer
from conveyor.state import Store


class Counts(Consumer):
    def consume(self):
        for message in self.messages:
            self.state[message.key] = self.state.get(message.key, 0) + 1


app = App(client_id="state-cli", kafka={{"bootstrap.servers": "{bootstrap}",
                                         "group.id": "state-cli-{suffix}",
                                         "auto.offset.reset": "earliest"}},
          max_wait_time=0.1, state_dir="state", state_flush_interval=0.1)
app.routes.topic("{topic}", Counts, state=Store(backend="rocksdb"))
"""


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_stores_are_listed_read_from_their_changelog_and_rebuilt_once_stopped(
    kafka_bootstrap: str,
    new_topic,
    kafka_admin: Admin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic = new_topic(partitions=2)
    module_name = f"state_cli_{suffix}"
    (tmp_path / f"{module_name}.py").write_text(
        APP.format(bootstrap=kafka_bootstrap, suffix=suffix, topic=topic)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    spec = f"{module_name}:app"
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "key": f"k{n % 3}", "payload": {"n": n}} for n in range(30)]
        )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    server = ServerProcess(
        conveyor_argv("server", "--app", spec, "--log-level", "WARNING"), env=env, cwd=tmp_path
    )
    changelog = ""
    try:
        output = ""
        for _ in range(300):  # flushed every 0.1 s once counted: 10 comes soon (bounded)
            code, output = _invoke("state", "get", "default", "k1", "--app", spec, "--json")
            if code == 0 and json.loads(output)["value"] == 10:
                break
            assert server.process.poll() is None, server.lines[-10:]
            threading.Event().wait(0.1)  # the server counts in its own process
        assert json.loads(output)["value"] == 10, output
        code, output = _invoke("state", "list", "--app", spec, "--json")
        assert code == 0, output
        [row] = json.loads(output)
        changelog = row["changelog"]
        assert (row["topic"], row["store"], row["kind"], row["backend"]) == (
            topic, "default", "store", "rocksdb"
        )  # fmt: skip
        assert changelog.endswith("-default-changelog")
        assert row["records"] >= 3
        assert row["local_folders"], "this host's copy is listed"
        code, output = _invoke("state", "list", "--app", spec)
        assert code == 0
        assert "default" in output
        code, output = _invoke("state", "rebuild", "default", "--app", spec, "--yes")
        assert code == 1
        assert "stop it first" in output
    finally:
        assert server.stop(signal.SIGTERM) == 0
    code, output = _invoke("state", "get", "default", "nope", "--app", spec)
    assert code == 0
    assert "is not in default" in output
    code, output = _invoke("state", "rebuild", "default", "--app", spec, "--yes")
    assert code == 0, output
    assert "deleted" in output
    code, output = _invoke("state", "list", "--app", spec, "--json")
    assert json.loads(output)[0]["local_folders"] == []
    kafka_admin.delete_topic(changelog)
