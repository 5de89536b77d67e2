"""`conveyor web install | migrate | reset | uninstall` leave the right topics."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from conveyor import Admin, Producer
from conveyor.web import WebTopics

HERE = Path(__file__).parent


def web(command: str, prefix: str, bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        WEB_PREFIX=prefix,
        PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "web", command, "--app", "web_app:app", *extra],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_install_then_reset_then_uninstall(kafka_bootstrap: str, kafka_admin: Admin) -> None:
    prefix = f"webcli-{uuid.uuid4().hex[:8]}"
    topics = WebTopics.prefixed(prefix)
    try:
        installed = web("install", prefix, kafka_bootstrap)
        assert installed.returncode == 0, installed.stderr
        assert "Install: plan" in installed.stdout  # the plan is shown before the changes
        assert set(topics.names) <= set(kafka_admin.list_topics())
        for name in (topics.states, topics.metrics):
            assert kafka_admin.describe_configs("topic", name)["cleanup.policy"].value == "compact"
        for name, days in ((topics.reports, 1), (topics.errors, 3)):
            configs = kafka_admin.describe_configs("topic", name)
            assert configs["cleanup.policy"].value == "delete"
            assert configs["retention.ms"].value == str(days * 86_400_000)

        again = web("migrate", prefix, kafka_bootstrap)
        assert again.returncode == 0, again.stderr
        assert "nothing to do" in again.stdout

        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_sync(topic=topics.errors, payload=b"{}")
        assert kafka_admin.read_watermark_offsets(topics.errors, 0)[1] == 1

        refused = web("reset", prefix, kafka_bootstrap)
        assert refused.returncode != 0
        assert "--yes" in refused.stderr
        reset = web("reset", prefix, kafka_bootstrap, "--yes")
        assert reset.returncode == 0, reset.stderr
        assert set(topics.names) <= set(kafka_admin.list_topics())
        assert kafka_admin.read_watermark_offsets(topics.errors, 0) == (0, 0)  # empty again
        assert (
            kafka_admin.describe_configs("topic", topics.states)["cleanup.policy"].value
            == "compact"
        )

        removed = web("uninstall", prefix, kafka_bootstrap, "--yes")
        assert removed.returncode == 0, removed.stderr
        assert not set(topics.names) & set(kafka_admin.list_topics())
    finally:
        for name in topics.names:
            if name in kafka_admin.list_topics():
                kafka_admin.delete_topic(name)
