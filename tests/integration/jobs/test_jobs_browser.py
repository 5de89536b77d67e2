"""Dead jobs in headless Chromium (Debian's package, driven by Playwright), on the app's own
web UI served by uvicorn: the Background jobs page counts the queue and links its dead jobs;
on their page one is discarded and the other retried with the page's buttons, and the
retried one runs.
Screenshots under tests/artifacts/."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn

from conveyor import App
from conveyor.admin import migrate
from conveyor.web.topics import WebTopics
from helpers import Record, running
from integration.web.test_browser import ARTIFACTS, chromium, eventually, free_port, get_json

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
]  # xdist: see tests/conftest.py


@contextmanager
def served(app: App) -> Iterator[str]:
    """The app's web UI on a port of its own (uvicorn in a thread)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app.web.asgi(), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert eventually(lambda: server.started, 30)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        app.web.data.stop()


def test_dead_jobs_are_discarded_and_retried_from_the_browser(
    kafka_bootstrap: str, web_topics: WebTopics
) -> None:

    suffix = uuid.uuid4().hex[:8]
    app = App(client_id=f"jobs-browser-{suffix}", max_wait_time=0.1,
              kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"jobs-browser-{suffix}"})  # fmt: skip
    app.schedules.enable(topic=f"test-schedules-{suffix}", partitions=1)
    app.web.enable(tracking_interval=0.5, topics=web_topics)
    healed = threading.Event()
    ran = Record()

    @app.job(queue=f"browser-{suffix}", name="ship", retries=0)
    def ship(parcel: int) -> None:
        if not healed.is_set():
            raise RuntimeError(f"parcel {parcel}: the carrier is down")
        ran.add(parcel)

    dead_topic = ship.queue.dead_topic
    migrate(app.admin, app.routes)
    with running(app), served(app) as url:
        ship.enqueue(1)
        ship.enqueue(2)
        assert eventually(lambda: get_json(f"{url}/api/dlq/{dead_topic}")["total"] == 2, 60)
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("dialog", lambda dialog: dialog.accept())  # the buttons' confirmations

            def ready() -> None:
                page.wait_for_selector("body[data-ready='1']")

            def shot(name: str) -> None:
                page.screenshot(path=str(ARTIFACTS / f"jobs-{name}.png"), full_page=True)

            page.goto(f"{url}/background-jobs")
            ready()
            assert f"browser-{suffix}" in page.locator("#job-queues").inner_text()
            shot("queues")
            page.click("#job-queues a.dead-jobs")
            ready()
            calls = page.locator("code.dead-job").all_inner_texts()
            assert sorted(calls) == ["ship(1)", "ship(2)"]
            shot("dead")

            row = page.locator("#dead-letters tbody tr", has_text="ship(2)")
            row.locator("input[name='refs']").check()
            page.click("#discard-selected")
            ready()
            assert page.locator("code.dead-job").all_inner_texts() == ["ship(1)"]
            assert "1 discarded" in page.locator(".hint").first.inner_text()

            healed.set()
            page.locator("#dead-letters tbody tr", has_text="ship(1)").locator(
                "input[name='refs']"
            ).check()
            page.click("#redrive-selected")
            ready()
            page.wait_for_selector("#redrive-facts[data-state='done']", timeout=60_000)
            shot("retried")
        assert ran.wait_for(lambda items: items == [1]), "the retried job ran, once"
    assert 2 not in ran.items, "the discarded one stays dead"
