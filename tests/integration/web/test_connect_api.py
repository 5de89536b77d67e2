"""Kafka Connect's REST API behind Conveyor's access rules, against a real broker: a worker
whose API asks for a password, the web UI serving the same API under ``/connect`` (an existing
Connect client from PyPI, ``kafka-connect-py``, drives a connector through it that a worker
runs), and the UI's rules applied to each call: sign-in, the CSRF token of a browser's
session, read-only mode and the policy with the action and the connector."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_connect import KafkaConnect
from requests.exceptions import HTTPError
from starlette.testclient import TestClient

from connect_workers import Worker, delete_cluster_topics, eventually
from conveyor import App, Producer
from conveyor.connect.runtime import ConnectCluster, WorkerSettings
from conveyor.web import WebTopics
from conveyor.web.access import hash_password
from helpers import free_port
from integration.web.test_browser import stop_processes

HERE = Path(__file__).parent
PASSWORD = "connect secret"
HASH = hash_password(PASSWORD)


def refused_with(call: Any) -> int:
    with pytest.raises(HTTPError) as refused:
        call()
    return refused.value.response.status_code


@pytest.fixture
def group(kafka_bootstrap: str) -> Iterator[str]:
    name = f"connect-{uuid.uuid4().hex[:8]}"
    yield name
    delete_cluster_topics(kafka_bootstrap, name)


def test_the_ui_serves_the_connect_api_to_a_connect_client_and_a_worker_asks_a_password(
    kafka_bootstrap: str, group: str, new_topic, web_topics: WebTopics, tmp_path: Path
) -> None:
    worker = Worker(kafka_bootstrap, group, tmp_path, password_hash=HASH, auth=f"admin:{PASSWORD}")
    port = free_port()
    env = dict(
        os.environ,
        KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
        CONVEYOR_CONNECT_GROUP=group,
        CONVEYOR_WEB_PASSWORD_HASH=HASH,
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"),
        PYTHONPATH=os.pathsep.join(
            [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]
        ),
    )
    argv = [sys.executable, "-m", "conveyor", "web", "--app", "connectors_web_app:app"]
    ui = subprocess.Popen(
        [*argv, "--port", str(port), "--no-aggregate"],
        cwd=HERE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert refused_with(KafkaConnect(url=worker.url).list_connectors) == 401
        wrong = KafkaConnect(url=worker.url, auth="admin:guess")
        assert refused_with(wrong.list_connectors) == 401
        assert worker.client.list_connectors() == []

        through_ui = KafkaConnect(url=f"http://127.0.0.1:{port}/connect", auth=f"admin:{PASSWORD}")
        eventually(lambda: _answers(through_ui), 60, "the UI's /connect")
        anonymous = KafkaConnect(url=f"http://127.0.0.1:{port}/connect")
        assert refused_with(anonymous.list_connectors) == 401

        topic = new_topic()
        out = tmp_path / "lines.txt"
        config = {"connector.class": "FileStreamSink", "topics": topic, "file": str(out)}
        created = through_ui.create_connector({"name": "lines", "config": config})
        assert created["tasks"] == [{"connector": "lines", "task": 0}]
        eventually(lambda: worker.client.list_connectors() == ["lines"], 30, "the worker's read")
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_sync(topic=topic, payload=b"a", key="a")
            eventually(lambda: out.exists() and out.read_text() == "a\n", 90, "the worker's line")

            through_ui.pause_connector("lines")
            eventually(lambda: _task_state(worker.client) == "PAUSED", 60, "paused")
            through_ui.resume_connector("lines")
            eventually(lambda: _task_state(worker.client) == "RUNNING", 60, "resumed")
            through_ui.restart_connector("lines", include_tasks=True)
            producer.produce_sync(topic=topic, payload=b"b", key="b")
            eventually(lambda: out.read_text() == "a\nb\n", 90, "a line after the restart")
        assert through_ui.get_connector_status("lines")["tasks"][0]["worker_id"].endswith(
            f":{worker.port}"
        )
        through_ui.delete_connector("lines")
        eventually(lambda: worker.client.list_connectors() == [], 30, "deleted")
    finally:
        stop_processes(ui)
        assert worker.stop(timeout=90) == 0, "\n".join(worker.lines[-40:])


def _answers(client: KafkaConnect) -> bool:
    try:
        return client.list_connectors() == []
    except (OSError, HTTPError):
        return False


def _task_state(client: KafkaConnect) -> str | None:
    tasks = client.get_connector_status("lines")["tasks"]
    return tasks[0]["state"] if tasks else None


def test_the_uis_rules_apply_to_each_connect_call(kafka_bootstrap: str, group: str) -> None:
    kafka = {"bootstrap.servers": kafka_bootstrap}
    cluster = ConnectCluster(WorkerSettings(kafka=kafka, worker_id="test", group=group))
    cluster.start(create=True)  # the cluster's topics, as its first worker makes them
    cluster.stop()
    asked: list[tuple[str | None, str, str]] = []

    def policy(user: str | None, action: str, target: str) -> bool:
        asked.append((user, action, target))
        return action != "delete"

    app = App(client_id="connect-ui", kafka=kafka)
    app.web.connect_group = group
    app.web.protect(password_hash=HASH, policy=policy)
    ui = TestClient(app.web.asgi(), follow_redirects=False)
    config = {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/never.txt"}
    basic = ("admin", PASSWORD)

    created = ui.post("/connect/connectors", json={"name": "x", "config": config}, auth=basic)
    assert created.status_code == 201, created.text
    assert ("admin", "configure", "connector x") in asked
    deleted = ui.delete("/connect/connectors/x", auth=basic)
    assert deleted.status_code == 403
    assert deleted.json() == {"error_code": 403, "message": "You may not delete connector x."}
    not_json = ui.put("/connect/connectors/x/config", content=b"{}", auth=basic)
    assert not_json.status_code == 415, "a form of another site cannot send a configuration"

    # a browser's session: signed in by the login form, each change echoes the page's token
    page = ui.get("/login").text
    token = page.split('name="csrf-token" content="')[1].split('"')[0]
    ui.post("/login", data={"password": PASSWORD, "csrf_token": token})
    token = ui.get("/login", follow_redirects=True).text.split('name="csrf-token" content="')[1]
    token = token.split('"')[0]
    assert ui.get("/connect/connectors").json() == ["x"], "reads need the session alone"
    forged = ui.put("/connect/connectors/x/pause")
    assert forged.status_code == 403
    assert "CSRF" in forged.json()["message"]
    paused = ui.put("/connect/connectors/x/pause", headers={"X-CSRF-Token": token})
    assert paused.status_code == 202
    assert ("admin", "pause", "connector x") in asked
    restarted = ui.post("/connect/connectors/x/tasks/0/restart", headers={"X-CSRF-Token": token})
    assert restarted.status_code == 204
    assert ("admin", "restart", "connector x task 0") in asked

    app.web.protect(password_hash=HASH, read_only=True)
    read_only = TestClient(app.web.asgi(), follow_redirects=False)
    assert read_only.get("/connect/connectors/x/config", auth=basic).json() == {
        **config,
        "name": "x",
    }
    refused = read_only.put("/connect/connectors/x/resume", auth=basic)
    assert refused.status_code == 403
    assert "read-only" in refused.json()["message"]
    assert TestClient(app.web.asgi()).delete("/connect/connectors/x", auth=basic).status_code == 403
