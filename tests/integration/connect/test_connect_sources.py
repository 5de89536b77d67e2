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


class Resource:
    """A JSON resource served on 127.0.0.1 with an ETag; answers 304 to a request that names
    its current ETag (counted in ``not_modified``)."""

    def __init__(self) -> None:
        import http.server  # noqa: PLC0415
        import threading  # noqa: PLC0415

        self.body, self.version, self.not_modified = b"[]", 0, 0
        resource = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                etag = f'"v{resource.version}"'
                if self.headers.get("If-None-Match") == etag:
                    resource.not_modified += 1
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("ETag", etag)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(resource.body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/prices"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def publish(self, items: list[dict[str, object]]) -> None:
        import json  # noqa: PLC0415

        self.body, self.version = json.dumps(items).encode(), self.version + 1


def test_an_http_source_writes_each_new_answer_once_through_a_restart(
    worker: Worker, kafka_bootstrap: str, new_topic
) -> None:
    resource = Resource()
    resource.publish([{"sku": "a", "price": 1}, {"sku": "b", "price": 2}])
    topic = new_topic()
    client = worker.client
    client.create_connector(
        {
            "name": "prices",
            "config": {
                "connector.class": "HttpPollingSource",
                "url": resource.url,
                "topic": topic,
                "poll.interval.ms": "100",
                "key.field": "sku",
            },
        }
    )

    def keyed() -> list[tuple[str, str]]:
        return [(m.key().decode(), m.value().decode()) for m in read_to_end(kafka_bootstrap, topic)]

    first = [("a", '{"sku":"a","price":1}'), ("b", '{"sku":"b","price":2}')]
    eventually(lambda: keyed() == first, what="the first answer")
    eventually(lambda: resource.not_modified >= 3, what="unchanged answers asked again")
    client.restart_connector("prices", include_tasks=True)
    resource.not_modified = 0
    eventually(lambda: resource.not_modified >= 3, what="the restarted task asks conditionally")
    resource.publish([{"sku": "a", "price": 3}])
    eventually(lambda: len(keyed()) >= 3, what="the new answer")
    assert keyed() == [*first, ("a", '{"sku":"a","price":3}')], "each answer once"
    resource.close()
