"""The web UI's Schedules page against the real broker: it lists the pending scheduled
messages by destination and due time, read from the schedules topic; Cancel (behind the CSRF
token) cancels one for good (it never arrives, while the one due after it does); a recurring
task is run now (its result, ok or the error, shows on the page), disabled (its slots are
skipped, still after a restart of the app) and enabled again (it runs again)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.testclient import TestClient

from conveyor import Admin, App, Consumer
from conveyor.admin import migrate
from conveyor.web.topics import WebTopics
from helpers import Record

ARRIVED = Record()
TICKS = Record()
TOCKS = Record()
REPORTS = Record()


class Arrivals(Consumer):
    def consume(self) -> None:
        ARRIVED.add(*(m.raw_payload.decode() for m in self.messages))


def eventually(check: Callable[[], Any], timeout: float = 60) -> Any:
    """``check()``'s first true value, looked for every 0.2 s up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "not within the time"
        threading.Event().wait(0.2)
    return found


@pytest.fixture
def suffix(kafka_admin: Admin) -> Iterator[str]:
    """A suffix for the test's topics and group; its schedules and tasks' topics go after."""
    for record in (ARRIVED, TICKS, TOCKS, REPORTS):
        record.items.clear()
    found = uuid.uuid4().hex[:8]
    yield found
    for name in (f"test-schedules-{found}", f"test-recurring-{found}"):
        if name in kafka_admin.list_topics():
            kafka_admin.delete_topic(name)


def new_app(
    bootstrap: str, suffix: str, target: str, topics: WebTopics, elsewhere: str = ""
) -> App:
    """The app; ``elsewhere`` a topic it does not route but sends schedules to."""
    app = App(client_id=f"sched-web-{suffix}", max_wait_time=0.1,
              kafka={"bootstrap.servers": bootstrap, "group.id": f"sched-web-{suffix}",
                     "session.timeout.ms": 6_000})  # fmt: skip
    app.routes.topic(target, Arrivals)
    app.schedules.enable(topic=f"test-schedules-{suffix}", partitions=2,
                         allowed_topics=[elsewhere] if elsewhere else ())  # fmt: skip
    tasks = f"test-recurring-{suffix}"

    def report() -> None:
        REPORTS.add("report")

    def broken() -> None:
        raise RuntimeError("the ledger is locked")

    app.recurring("0 0 1 1 *", report, name="report", topic=tasks)
    app.recurring("0 0 1 1 *", broken, name="broken", topic=tasks)
    app.recurring("* * * * * *", lambda: None, name="tick", topic=tasks)
    app.recurring("* * * * * *", lambda: None, name="tock", topic=tasks)
    app.monitor.subscribe(
        "recurring.ran",
        lambda event: {"tick": TICKS, "tock": TOCKS}.get(event["task"], Record()).add(
            event["slot"]
        ),
    )
    app.web.enable(tracking_interval=0.5, topics=topics)
    return app


@contextmanager
def ui(app: App) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The app's UI and the headers that carry its CSRF token."""
    client = TestClient(app.web.asgi())
    try:
        token = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/login").text)
        assert token
        yield client, {"X-CSRF-Token": token.group(1)}
    finally:
        client.close()
        app.web.data.stop()


def task_row(client: TestClient, name: str) -> dict[str, Any]:
    rows = {row["name"]: row for row in client.get("/api/schedules").json()["tasks"]}
    return rows[name]


def test_the_page_lists_pending_schedules_and_cancel_really_cancels(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, suffix: str
) -> None:
    target, elsewhere = new_topic(), new_topic()
    app = new_app(kafka_bootstrap, suffix, target, web_topics, elsewhere)
    producer = app.producer
    with ui(app) as (client, csrf):
        assert client.get("/api/schedules").json()["missing"], "nothing scheduled yet"
        migrate(app.admin, app.routes)
        app.start()
        try:
            now = time.time()
            doomed = producer.produce_at(now + 4, topic=target, payload=b"doomed", key="k-1",
                                         schedules_topic=app.schedules.topic)  # fmt: skip
            producer.produce_at(now + 6, topic=target, payload=b"marker",
                                schedules_topic=app.schedules.topic)  # fmt: skip
            later = producer.produce_at(now + 3600, topic=elsewhere, payload=b"x" * 10,
                                        schedules_topic=app.schedules.topic)  # fmt: skip
            page = client.get("/api/schedules").json()
            assert page["total"] == 3, page
            assert [(r["topic"], r["key"]) for r in page["pending"]] == [
                (target, "k-1"), (target, None), (elsewhere, None)
            ], "due first, with their destinations"  # fmt: skip
            assert {t["topic"]: t["pending"] for t in page["by_topic"]} == {
                target: 2, elsewhere: 1
            }  # fmt: skip
            only = client.get("/api/schedules", params={"topic": elsewhere}).json()
            assert [r["id"] for r in only["pending"]] == [later]
            assert only["pending"][0]["size"] == 10
            html = client.get("/schedules").text
            assert doomed in html
            assert "Cancel" in html

            refused = client.post(f"/api/schedules/{doomed}/cancel", json={})
            assert refused.status_code == 403, "no CSRF token"
            unknown = client.post("/api/schedules/no-such-id/cancel", json={}, headers=csrf)
            assert unknown.status_code == 404
            cancelled = client.post(f"/api/schedules/{doomed}/cancel", json={}, headers=csrf)
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["cancelled"] == doomed

            assert ARRIVED.wait_for(lambda items: "marker" in items), "the later one arrives"
            assert "doomed" not in ARRIVED.items, "cancelled: never sent, though due first"
            left = eventually(lambda: (p := client.get("/api/schedules").json())["total"] == 1
                              and p)  # fmt: skip
            assert [r["id"] for r in left["pending"]] == [later]
        finally:
            app.stop_and_wait()


def test_recurring_tasks_run_now_disable_and_enable_from_the_page(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, suffix: str
) -> None:
    target = new_topic()
    first = new_app(kafka_bootstrap, suffix, target, web_topics)
    tasks = first.recurring_tasks
    assert tasks is not None
    migrate(first.admin, first.routes)
    with ui(first) as (client, csrf):
        first.start()
        try:
            assert TOCKS.wait_for(lambda items: len(items) >= 1), "a process runs the tasks"
            row = task_row(client, "report")
            assert (row["cron"], row["enabled"], row["result"]) == ("0 0 1 1 *", True, None)
            assert row["next_at"] is not None

            refused = client.post("/api/schedules/tasks/run", json={"task": "report"})
            assert refused.status_code == 403, "no CSRF token"
            unknown = client.post("/api/schedules/tasks/run", json={"task": "nope"}, headers=csrf)
            assert unknown.status_code == 404
            for name in ("report", "broken"):
                ran = client.post("/api/schedules/tasks/run", json={"task": name}, headers=csrf)
                assert ran.status_code == 200, ran.text
            assert REPORTS.wait_for(lambda items: len(items) == 1), "run now ran it"
            result = eventually(lambda: task_row(client, "report")["result"])
            assert (result["ok"], result["manual"]) == (True, True)
            failed = eventually(lambda: task_row(client, "broken")["result"])
            assert failed["ok"] is False
            assert failed["error"] == "RuntimeError: the ledger is locked"

            off = client.post("/api/schedules/tasks/disable", json={"task": "tick"}, headers=csrf)
            assert off.status_code == 200, off.text
            eventually(lambda: not tasks.enabled("tick"), 30)  # the leader read the record
            disabled_at = time.time()
            assert TOCKS.wait_for(lambda items: sum(s > disabled_at + 1 for s in items) >= 2)
            assert not [s for s in TICKS.items if s > disabled_at + 1], "tick's slots skipped"
            row = task_row(client, "tick")
            assert (row["enabled"], row["next_at"]) == (False, None)
            assert row["changed_by"] == "web UI (anonymous)"
        finally:
            first.stop_and_wait()
    assert len(REPORTS.items) == 1, "a request to run now runs once, not again at a restart"

    second = new_app(kafka_bootstrap, suffix, target, web_topics)
    with ui(second) as (client, csrf):
        second.start()
        try:
            restarted = time.time()
            assert TOCKS.wait_for(lambda items: sum(s > restarted for s in items) >= 3)
            assert not [s for s in TICKS.items if s > disabled_at + 1], "still disabled"
            on = client.post("/api/schedules/tasks/enable", json={"task": "tick"}, headers=csrf)
            assert on.status_code == 200, on.text
            assert TICKS.wait_for(lambda items: any(s > restarted for s in items)), "runs again"
            assert task_row(client, "tick")["enabled"] is True
            assert len(REPORTS.items) == 1
        finally:
            second.stop_and_wait()
