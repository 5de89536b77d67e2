"""The Connectors page in headless Chromium with real data: a `conveyor connect worker` runs
one connector that works and one whose task fails, and `conveyor web` shows both (the failed
task's error), then pauses, resumes and restarts the working one from its buttons, which the
worker carries out (its REST API and its consumer group say so)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from connect_workers import Worker, delete_cluster_topics
from conveyor import Admin
from conveyor.web import WebTopics
from helpers import free_port
from integration.web.test_browser import (
    ARTIFACTS,
    chromium,
    eventually,
    get_json,
    stop_processes,
    visit,
)

HERE = Path(__file__).parent

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def test_the_connectors_page_shows_states_and_errors_and_pauses_resumes_and_restarts(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, tmp_path: Path
) -> None:

    group = f"connect-{uuid.uuid4().hex[:8]}"
    worker = Worker(kafka_bootstrap, group, tmp_path)
    port = free_port()
    env = dict(
        os.environ,
        KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
        CONVEYOR_CONNECT_GROUP=group,
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"),
        PYTHONPATH=os.pathsep.join(
            [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]
        ),
    )
    ui = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conveyor",
            "web",
            "--app",
            "connectors_web_app:app",
            "--port",
            str(port),
        ],
        cwd=HERE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    site = f"http://127.0.0.1:{port}"
    client = worker.client
    try:
        topic = new_topic()
        client.create_connector(
            {
                "name": "lines",
                "config": {
                    "connector.class": "FileStreamSink",
                    "topics": topic,
                    "file": str(tmp_path / "lines.txt"),
                },
            }
        )
        blocked = tmp_path / "a-file"
        blocked.write_text("")
        client.create_connector(
            {
                "name": "broken",
                "config": {
                    "connector.class": "FileStreamSink",
                    "topics": topic,
                    "file": str(blocked / "under.txt"),
                },
            }
        )

        def members(group: str) -> set[str]:
            with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
                try:
                    return {m.member_id for m in admin.describe_consumer_group(group).members}
                except Exception:
                    return set()

        def task_state(name: str) -> str:
            return str(client.get_connector_status(name)["tasks"][0]["state"])

        def shown() -> bool:
            try:
                rows = {c["name"]: c for c in get_json(f"{site}/api/connectors")["connectors"]}
            except OSError:
                return False  # the UI is not listening yet
            return (
                rows.get("lines", {}).get("tasks", [{}])[0].get("state") == "RUNNING"
                and rows.get("broken", {}).get("tasks", [{}])[0].get("state") == "FAILED"
            )

        assert eventually(shown, 90), get_json(f"{site}/api/connectors")
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            visit(page, f"{site}/connectors")
            assert page.title().startswith("Connectors")
            assert "/connect" in page.locator("p.hint").inner_text(), "where the REST API is"
            assert page.locator("#connectors tbody tr[data-connector]").count() == 2
            failed = page.locator("#connector-tasks tr[data-connector='broken'] details")
            assert "FileExistsError" in failed.inner_text(), "the error's last line shown"
            page.screenshot(path=str(ARTIFACTS / "web-connectors-1280.png"), full_page=True)
            page.set_viewport_size({"width": 1920, "height": 1000})
            page.screenshot(path=str(ARTIFACTS / "web-connectors-1920.png"), full_page=True)

            lines = "#connectors tr[data-connector='lines']"
            page.click(f"{lines} button.connector-pause")
            page.wait_for_load_state()
            assert eventually(lambda: task_state("lines") == "PAUSED", 60)
            visit(page, f"{site}/connectors")
            assert "PAUSED" in page.locator(lines).inner_text()
            page.click(f"{lines} button.connector-resume")
            page.wait_for_load_state()
            assert eventually(lambda: task_state("lines") == "RUNNING", 60)

            # restart the working task: its sink rejoins its group as a new member
            # (RUNNING is reported when the task starts, before its sink has joined)
            assert eventually(lambda: bool(members("connect-lines")), 60)
            before = members("connect-lines")
            visit(page, f"{site}/connectors")
            page.click("#connector-tasks tr[data-connector='lines'] button.task-restart")
            page.wait_for_load_state()
            assert eventually(
                lambda: (
                    (now := members("connect-lines")) != before
                    and bool(now)
                    and task_state("lines") == "RUNNING"
                ),
                60,
            )
    finally:
        stop_processes(ui)
        worker.stop(timeout=90)
        delete_cluster_topics(kafka_bootstrap, group)
