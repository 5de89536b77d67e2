"""The Schedules page against the real broker reads only what is new: its first load folds
the whole schedules topic, each later one reads the records written since (a schedule added,
one cancelled) and still shows exactly what is pending; a load with nothing new reads nothing.
The count is the page's own (``scanned``: the records this load read), next to what it lists."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from conveyor import Admin, App
from conveyor.admin import migrate


@pytest.fixture
def app(kafka_bootstrap: str, kafka_admin: Admin) -> Iterator[App]:
    """An app that dispatches schedules (its own topic, two partitions), not running: its UI
    alone, as ``conveyor web`` serves it. Its schedules topic goes after the test."""
    name = f"sched-page-{uuid.uuid4().hex[:8]}"
    found = App(client_id=name, kafka={"bootstrap.servers": kafka_bootstrap})
    found.schedules.enable(partitions=2)
    migrate(found.admin, found.routes)
    yield found
    if found.schedules.topic in kafka_admin.list_topics():
        kafka_admin.delete_topic(found.schedules.topic)


def test_a_second_load_reads_only_the_records_written_since_the_first(app: App) -> None:
    producer, later = app.producer, time.time() + 3600
    first = [producer.produce_at(later + n, topic="reminders", payload=b"x") for n in range(5)]
    client = TestClient(app.web.asgi())
    try:
        page = client.get("/api/schedules").json()
        assert (page["total"], page["scanned"], page["complete"]) == (5, 5, True)

        added = producer.produce_at(later + 10, topic="reminders", payload=b"y")
        producer.cancel_scheduled(first[0])
        page = client.get("/api/schedules").json()
        assert [row["id"] for row in page["pending"]] == [*first[1:], added], "exactly the pending"
        assert page["scanned"] == 2, "the schedule and the tombstone written since: no more"

        page = client.get("/api/schedules").json()
        assert (page["total"], page["scanned"]) == (5, 0), "nothing new: nothing read"
        assert client.get("/schedules").status_code == 200
    finally:
        client.close()
        app.web.data.stop()
