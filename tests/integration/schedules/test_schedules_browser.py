"""The Schedules page in headless Chromium (Debian's package, driven by Playwright), on the
app's own web UI served by uvicorn: it lists two pending scheduled messages and the recurring
tasks; the page's Cancel cancels one (it never arrives, the other does) and its Disable
disables a task (the page then offers Enable). At 1280 px every table stays inside its card,
a task with a long name and a long error (a URL) included. Screenshots under tests/artifacts/."""

from __future__ import annotations

import time
import uuid

import pytest

from conveyor import Admin, App, Consumer
from conveyor.admin import migrate
from conveyor.web.topics import WebTopics
from helpers import Record, running
from integration.jobs.test_jobs_browser import served
from integration.web.test_browser import ARTIFACTS, chromium, eventually, get_json

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
]  # xdist: see tests/conftest.py
ARRIVED = Record()
LONG_TASK = "purge-abandoned-carts-older-than-thirty-days-in-every-region"
WIDER = """() => [...document.querySelectorAll('.scroll > table')].map(table => {
    const card = table.parentElement, edge = card.getBoundingClientRect().right;
    return [table.id, table.getBoundingClientRect().right <= edge + 0.5
                      && card.scrollWidth <= card.clientWidth];
})"""
"""Each table in a card (``.scroll``): its id, and whether it fits the card (its right edge
within the card's, nothing to scroll)."""


class Arrivals(Consumer):
    def consume(self) -> None:
        ARRIVED.add(*(m.raw_payload.decode() for m in self.messages))


def purge() -> None:
    raise ConnectionError(
        "no answer from https://warehouse.internal.example.com/api/v2/carts/purge?region=eu-west-1"
        "&older_than=30d&dry_run=false&batch=500"
    )


def test_a_schedule_is_cancelled_and_a_task_disabled_from_the_browser(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic, web_topics: WebTopics
) -> None:

    suffix = uuid.uuid4().hex[:8]
    target = new_topic()
    app = App(client_id=f"sched-browser-{suffix}", max_wait_time=0.1,
              kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"sched-browser-{suffix}"})  # fmt: skip
    app.routes.topic(target, Arrivals)
    app.schedules.enable(topic=f"test-schedules-{suffix}", partitions=1)
    app.recurring("0 0 1 1 *", lambda: None, name="yearly-report",
                  topic=f"test-recurring-{suffix}")  # fmt: skip
    app.recurring("0 3 * * MON,WED,FRI", purge, name=LONG_TASK, topic=f"test-recurring-{suffix}")
    app.web.enable(tracking_interval=0.5, topics=web_topics)
    migrate(app.admin, app.routes)
    try:
        with running(app), served(app) as url:
            # due after the page's work, which takes 10-25 s (the cancel must beat "doomed",
            # and "kept" must still be pending then); "kept" arriving proves "doomed" was due
            now = time.time()
            doomed = app.producer.produce_at(now + 40, topic=target, payload=b"doomed",
                                             schedules_topic=app.schedules.topic)  # fmt: skip
            app.producer.produce_at(now + 42, topic=target, payload=b"kept",
                                    schedules_topic=app.schedules.topic)  # fmt: skip
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.on("dialog", lambda dialog: dialog.accept())  # the confirmations

                def ready() -> None:
                    page.wait_for_selector("body[data-ready='1']")

                page.goto(f"{url}/schedules")
                ready()
                rows = page.locator("#pending-schedules tbody tr[data-schedule]")
                assert rows.count() == 2
                assert "yearly-report" in page.locator("#recurring-tasks").inner_text()
                page.screenshot(path=str(ARTIFACTS / "schedules-page.png"), full_page=True)
                # every table fits its card at 1280 px, long topic and task names and all
                assert page.evaluate(WIDER) == [
                    ["schedules-by-topic", True], ["pending-schedules", True],
                    ["recurring-tasks", True],
                ]  # fmt: skip
                box = rows.first.locator("button.cancel-schedule").bounding_box()
                assert box is not None
                assert box["x"] + box["width"] <= 1280, box

                page.locator(f"tr[data-schedule='{doomed}'] button.cancel-schedule").click()
                ready()
                assert rows.count() == 1
                assert doomed not in page.locator("#pending-schedules").inner_text()

                page.locator("tr[data-task='yearly-report'] button.task-disable").click()
                ready()
                task = page.locator("tr[data-task='yearly-report']")
                assert "disabled" in task.inner_text()
                assert task.locator("button.task-enable").count() == 1
                page.screenshot(path=str(ARTIFACTS / "schedules-done.png"), full_page=True)

                # a long error (a URL) wraps inside the card too
                page.locator(f"tr[data-task='{LONG_TASK}'] button.task-run").click()
                ready()
                assert eventually(lambda: "warehouse.internal" in str(
                    get_json(f"{url}/api/schedules")["tasks"]), 30)  # fmt: skip
                page.goto(f"{url}/schedules")
                ready()
                failed = page.locator(f"tr[data-task='{LONG_TASK}'] .task-error")
                assert "ConnectionError: no answer from https://" in failed.inner_text()
                assert [fits for _, fits in page.evaluate(WIDER)] == [True, True, True]
                page.screenshot(path=str(ARTIFACTS / "schedules-1280.png"), full_page=True)
            [left] = get_json(f"{url}/api/schedules")["pending"]
            assert left["id"] != doomed
            assert ARRIVED.wait_for(lambda items: "kept" in items), "the other one arrives"
            assert "doomed" not in ARRIVED.items, "the cancelled one never does"
            assert eventually(
                lambda: (
                    not next(
                        t
                        for t in get_json(f"{url}/api/schedules")["tasks"]
                        if t["name"] == "yearly-report"
                    )["enabled"]
                ),
                10,
            )
    finally:
        for name in (app.schedules.topic, f"test-recurring-{suffix}"):
            if name in kafka_admin.list_topics():
                kafka_admin.delete_topic(name)
