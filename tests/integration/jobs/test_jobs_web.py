"""The web UI's side of background jobs: the Background jobs page counts each queue's jobs
(waiting, done, retried, died, dead); a queue's dead-job topic is one of the DLQs, its dead
jobs show their error, and a redrive sends them back to their queue, attempts from 1 (behind
the UI's CSRF token and access rules)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import Any

from starlette.testclient import TestClient

from conveyor import App
from conveyor.admin import migrate
from conveyor.web.topics import WebTopics
from helpers import Record, running


def test_the_background_jobs_page_counts_the_queues_and_dead_jobs_are_retried_from_the_ui(
    kafka_bootstrap: str, web_topics: WebTopics
) -> None:
    suffix = uuid.uuid4().hex[:8]
    app = App(client_id=f"jobs-web-{suffix}", max_wait_time=0.1,
              kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"jobs-web-{suffix}"})  # fmt: skip
    app.schedules.enable(topic=f"test-schedules-{suffix}", partitions=1)
    app.web.enable(tracking_interval=0.5, topics=web_topics)
    healed = threading.Event()
    done = Record()

    @app.job(queue=f"web-{suffix}", name="invoice", retries=1, backoff=0.1)
    def invoice(order: int) -> None:
        if order < 0 and not healed.is_set():
            raise ValueError(f"order {order} is not billable")
        done.add(order)

    queue = invoice.queue
    migrate(app.admin, app.routes)
    with running(app):
        for order in (1, 2, -3, -4):
            invoice.enqueue(order)
        assert done.wait_for(lambda items: sorted(items) == [1, 2])
        client = TestClient(app.web.asgi())
        try:
            token = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/login").text)
            assert token
            row: dict[str, Any] = {}
            deadline = time.monotonic() + 60
            while not (
                row.get("done") == 2
                and row.get("dead") == 2
                and row.get("retried") == 2
                and row.get("died") == 2
            ):
                assert time.monotonic() < deadline, str(sorted(row.items()))
                threading.Event().wait(0.2)  # the processes report every 0.5 s
                [row] = client.get("/api/background-jobs").json()["queues"]
            assert (row["queue"], row["jobs"]) == (queue.name, ["invoice"])
            assert "job-queues" in client.get("/background-jobs").text

            dlqs = {d["name"]: d for d in client.get("/api/dlq").json()["dlqs"]}
            assert dlqs[queue.dead_topic]["sources"] == [queue.topic]
            letters = client.get(f"/api/dlq/{queue.dead_topic}").json()["letters"]
            by_call = {letter["job"]: letter for letter in letters}
            assert set(by_call) == {"invoice(-3)", "invoice(-4)"}
            discarded = client.post(f"/api/dlq/{queue.dead_topic}/discard",
                                    json={"refs": [by_call["invoice(-4)"]["ref"]]},
                                    headers={"X-CSRF-Token": token.group(1)})  # fmt: skip
            assert discarded.json() == {"discarded": 1}
            refused = client.post(f"/api/dlq/{queue.dead_topic}/discard",
                                  json={"refs": [by_call["invoice(-4)"]["ref"]]})  # fmt: skip
            assert refused.status_code == 403, "no CSRF token"
            page = client.get(f"/api/dlq/{queue.dead_topic}").json()
            [letter] = page["letters"]
            assert page["discarded"] == 1
            assert (letter["error_class"], letter["attempts"]) == ("ValueError", 2)
            assert "order -3 is not billable" in letter["error_message"]
            assert letter["job"] == "invoice(-3)", "the dead job's call, its arguments"
            page = client.get(f"/dlq/{queue.dead_topic}")
            assert page.status_code == 200
            assert "invoice(-3)" in page.text

            healed.set()
            refused = client.post(
                f"/api/dlq/{queue.dead_topic}/redrive", json={"refs": [letter["ref"]]}
            )
            assert refused.status_code == 403, "no CSRF token"
            started = client.post(f"/api/dlq/{queue.dead_topic}/redrive", json={"all": True},
                                  headers={"X-CSRF-Token": token.group(1)})  # fmt: skip
            assert started.status_code == 202, started.text
            assert done.wait_for(lambda items: -3 in items), "sent back to its queue and run"
            job = started.json()
            deadline = time.monotonic() + 30
            while job["state"] == "running":
                assert time.monotonic() < deadline, job
                threading.Event().wait(0.1)
                job = client.get(f"/api/dlq/{queue.dead_topic}/redrives/{job['id']}").json()[
                    "redrive"
                ]
            assert job["counts"] == {queue.topic: 1}, "all but the discarded one"
            assert -4 not in done.items
        finally:
            client.close()
            app.web.data.stop()
