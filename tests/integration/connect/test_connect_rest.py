"""``conveyor connect worker`` driven by an existing Kafka Connect REST client from PyPI
(``kafka-connect-py``, unchanged): it creates, lists, pauses, resumes, restarts and deletes
Conveyor connectors, sees a failing task's trace and fixes it, and has a bad configuration
refused field by field, as against Kafka Connect."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_connect import KafkaConnect
from requests.exceptions import HTTPError

from connect_workers import Worker, eventually
from conveyor import Admin, Producer


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def task_state(client: KafkaConnect, name: str) -> str | None:
    tasks = client.get_connector_status(name)["tasks"]
    return tasks[0]["state"] if tasks else None


def group_members(bootstrap: str, group: str) -> int:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        try:
            return len(admin.describe_consumer_group(group).members)
        except Exception:
            return 0


def test_a_kafka_connect_client_runs_a_conveyor_connector_through_its_life(
    worker: Worker, kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    client = worker.client
    topic = new_topic(partitions=2)
    out = tmp_path / "out" / "lines.txt"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})

    def produce(*values: str) -> None:
        for value in values:
            producer.produce_sync(topic=topic, payload=value.encode(), key=value)

    assert "FileSinkConnector" in str(client.list_connector_plugins())
    created = client.create_connector(
        {
            "name": "lines",
            "config": {"connector.class": "FileStreamSink", "topics": topic, "file": str(out)},
        }
    )
    assert created["name"] == "lines"
    assert created["type"] == "sink"
    assert created["tasks"] == [{"connector": "lines", "task": 0}]
    assert client.list_connectors() == ["lines"]
    produce("a", "b", "c")
    eventually(lambda: sorted(lines_of(out)) == ["a", "b", "c"], what="the first records")
    status = client.get_connector_status("lines")
    assert status["connector"]["state"] == "RUNNING"
    assert status["tasks"][0]["worker_id"] == f"127.0.0.1:{worker.port}"

    client.pause_connector("lines")
    eventually(lambda: task_state(client, "lines") == "PAUSED", what="paused")
    # paused: the task left its consumer group, so nothing more is read
    assert group_members(kafka_bootstrap, "connect-lines") == 0
    produce("d", "e")
    client.resume_connector("lines")
    eventually(lambda: sorted(lines_of(out)) == ["a", "b", "c", "d", "e"], what="resumed")
    assert task_state(client, "lines") == "RUNNING"

    client.restart_connector("lines", include_tasks=True)
    eventually(lambda: task_state(client, "lines") == "RUNNING", what="restarted")
    produce("f")
    eventually(lambda: "f" in lines_of(out), what="a record after the restart")
    assert sorted(lines_of(out)) == ["a", "b", "c", "d", "e", "f"], "no record twice"

    client.delete_connector("lines")
    assert client.list_connectors() == []
    with pytest.raises(HTTPError) as missing:
        client.get_connector_status("lines")
    assert missing.value.response.status_code == 404
    assert missing.value.response.json() == {
        "error_code": 404,
        "message": "Connector lines not found",
    }
    eventually(lambda: group_members(kafka_bootstrap, "connect-lines") == 0, what="task stopped")
    produce("g")
    assert "g" not in lines_of(out)


def test_a_failing_task_shows_its_trace_and_runs_once_reconfigured(
    worker: Worker, new_topic, tmp_path: Path
) -> None:
    client = worker.client
    topic = new_topic()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    config = {
        "connector.class": "FileStreamSink",
        "topics": topic,
        "file": str(blocked / "under-a-file.txt"),
    }
    client.create_connector({"name": "broken", "config": config})
    eventually(lambda: task_state(client, "broken") == "FAILED", what="the task failed")
    [failed] = client.get_connector_status("broken")["tasks"]
    assert "NotADirectoryError" in failed["trace"] or "FileExistsError" in failed["trace"]
    client.restart_connector_task("broken", 0)  # the same configuration fails again
    eventually(lambda: task_state(client, "broken") == "FAILED", what="failed again")
    client.update_connector("broken", {**config, "file": str(tmp_path / "fixed.txt")})
    eventually(lambda: task_state(client, "broken") == "RUNNING", what="reconfigured")
    assert "trace" not in client.get_connector_status("broken")["tasks"][0]


def test_a_bad_configuration_is_refused_field_by_field(worker: Worker, new_topic) -> None:
    client = worker.client
    topic = new_topic()
    checked = client.validate_connector_config(
        "FileStreamSink",
        {"connector.class": "FileStreamSink", "topics": topic, "tasks.max": "zero", "name": "x"},
    )
    assert checked["error_count"] == 2
    errors = {c["value"]["name"]: c["value"]["errors"] for c in checked["configs"]}
    assert errors["file"] == ['Missing required configuration "file" which has no default value.']
    assert "Not a number of type INT" in errors["tasks.max"][0]
    with pytest.raises(HTTPError) as refused:
        client.create_connector(
            {"name": "bad", "config": {"connector.class": "FileStreamSink", "topics": topic}}
        )
    assert refused.value.response.status_code == 400
    assert "file: Missing required configuration" in refused.value.response.json()["message"]
    with pytest.raises(HTTPError) as unknown:
        client.create_connector({"name": "bad", "config": {"connector.class": "NoSuchSink"}})
    assert unknown.value.response.status_code == 400
    assert "NoSuchSink" in unknown.value.response.json()["message"]
    assert client.list_connectors() == []


def test_the_postgres_sink_runs_as_a_plugin_configured_over_rest(
    worker: Worker, kafka_bootstrap: str, new_topic, postgres_dsn: str
) -> None:
    import psycopg  # noqa: PLC0415

    topic = new_topic()
    table = f"rows_{topic.rsplit('-', 1)[-1]}"
    worker.client.create_connector(
        {
            "name": "rows",
            "config": {
                "connector.class": "PostgresSink",
                "topics": topic,
                "database.url": postgres_dsn,
                "table": table,
            },
        }
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(3):
        producer.produce_sync(topic=topic, payload={"n": n}, key=f"k{n}")

    def stored() -> list[tuple[str, int]]:
        try:
            with psycopg.connect(postgres_dsn) as db:
                rows = db.execute(f"SELECT key, (payload->>'n')::int FROM {table} ORDER BY 2")
                return [(key, n) for key, n in rows.fetchall()]
        except psycopg.errors.UndefinedTable:
            return []

    eventually(lambda: stored() == [("k0", 0), ("k1", 1), ("k2", 2)], what="the rows")
    worker.client.delete_connector("rows")
