"""Source connectors on ``conveyor connect worker``: a file's lines into a topic exactly once
(records and source offsets in one transaction) through a restart of the task, and through a
SIGKILL of the worker running it, the other worker of the cluster taking the task over."""

from __future__ import annotations

import uuid
from pathlib import Path

from connect_workers import Worker, delete_cluster_topics, eventually
from helpers import read_to_end


def append(path: Path, first: int, count: int) -> None:
    with path.open("a") as file:
        file.writelines(f"line-{n}\n" for n in range(first, first + count))


def values(bootstrap: str, topic: str) -> list[str]:
    return [m.value().decode() for m in read_to_end(bootstrap, topic)]


def test_a_file_source_writes_each_line_once_through_a_restart(
    worker: Worker, kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    client = worker.client
    topic = new_topic()
    source = tmp_path / "app.log"
    append(source, 0, 500)
    source.write_text(source.read_text() + "half a li")  # no newline yet: not a line yet
    client.create_connector(
        {
            "name": "log",
            "config": {
                "connector.class": "FileStreamSource",
                "file": str(source),
                "topic": topic,
                "batch.size": "100",
            },
        }
    )
    expected = [f"line-{n}" for n in range(500)]
    eventually(lambda: values(kafka_bootstrap, topic) == expected, what="the first 500 lines")
    assert client.get_connector_status("log")["type"] == "source"
    client.restart_connector("log", include_tasks=True)
    with source.open("a") as file:
        file.write("ne\n")
    append(source, 500, 500)
    expected += ["half a line"] + [f"line-{n}" for n in range(500, 1000)]
    eventually(lambda: len(values(kafka_bootstrap, topic)) >= 1001, what="the lines after")
    assert values(kafka_bootstrap, topic) == expected, "each line once, in order"


def test_a_killed_worker_s_source_task_moves_to_the_other_with_each_line_once(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    group = f"connect-{uuid.uuid4().hex[:8]}"
    first, second = (
        Worker(kafka_bootstrap, group, tmp_path),
        Worker(kafka_bootstrap, group, tmp_path),
    )
    try:
        topic = new_topic()
        source = tmp_path / "app.log"
        append(source, 0, 2_000)
        first.client.create_connector(
            {
                "name": "log",
                "config": {
                    "connector.class": "FileStreamSource",
                    "file": str(source),
                    "topic": topic,
                    "batch.size": "50",
                },
            }
        )
        status = eventually(
            lambda: (
                (s := first.client.get_connector_status("log"))["tasks"][0]["state"] == "RUNNING"
                and s
            ),
            what="the task running",
        )
        owner = status["tasks"][0]["worker_id"]
        doomed, survivor = (first, second) if owner.endswith(f":{first.port}") else (second, first)
        eventually(lambda: len(values(kafka_bootstrap, topic)) >= 500, what="lines flowing")
        doomed.kill()
        append(source, 2_000, 2_000)
        eventually(
            lambda: (
                survivor.client.get_connector_status("log")["tasks"][0]["worker_id"]
                == f"127.0.0.1:{survivor.port}"
            ),
            timeout=90,
            what="the task taken over",
        )
        expected = [f"line-{n}" for n in range(4_000)]
        eventually(
            lambda: len(values(kafka_bootstrap, topic)) >= 4_000, timeout=90, what="every line"
        )
        assert values(kafka_bootstrap, topic) == expected, "no line lost, none twice"
    finally:
        for one in (first, second):
            if one.process.poll() is None:
                one.stop(timeout=90)
        delete_cluster_topics(kafka_bootstrap, group)


def test_a_poll_that_fails_midway_writes_none_of_its_records_and_is_read_again(
    kafka_bootstrap: str, new_topic, tmp_path: Path
) -> None:
    """Exactly once: the records of the failed poll handed to the producer before the bad
    one are aborted with its transaction; the task, fixed and restarted, reads them again
    from the offsets committed with the poll before."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    worker = Worker(kafka_bootstrap, group, tmp_path, plugins=Path(__file__).parent)
    try:
        client = worker.client
        topic = new_topic()
        source = tmp_path / "app.log"
        append(source, 0, 100)
        client.create_connector(
            {
                "name": "log",
                "config": {
                    "connector.class": "failing_source.FailingSourceConnector",
                    "file": str(source),
                    "topic": topic,
                    "batch.size": "1000",
                },
            }
        )
        eventually(lambda: len(values(kafka_bootstrap, topic)) == 100, what="the first poll")
        append(source, 100, 50)
        with source.open("a") as file:
            file.write("boom\n")
        append(source, 151, 49)
        eventually(
            lambda: client.get_connector_status("log")["tasks"][0]["state"] == "FAILED",
            what="the task failed",
        )
        assert "bad" in client.get_connector_status("log")["tasks"][0]["trace"]
        source.write_text(source.read_text().replace("boom\n", "line!!!\n"))
        client.restart_connector_task("log", 0)
        expected = (
            [f"line-{n}" for n in range(150)] + ["line!!!"] + [f"line-{n}" for n in range(151, 200)]
        )
        eventually(lambda: len(values(kafka_bootstrap, topic)) >= 200, what="the rest")
        assert values(kafka_bootstrap, topic) == expected, "the failed poll's records once"
    finally:
        assert worker.stop(timeout=90) == 0, "\n".join(worker.lines[-40:])
        delete_cluster_topics(kafka_bootstrap, group)
