"""The web UI's actions in headless Chromium (Debian's package, driven by Playwright), against
a real `conveyor server` and two `conveyor web` processes: one behind a password, one
read-only. Sign in; explore a topic, filter it, open a message (a payload holding <script>
shows as text and never runs), export what matches; probe and quiet the running process, then quiet every process from the
processes page (after a confirmation that says it is every process);
redrive a dead letter queue and see the consumer take the messages back; the read-only UI
shows no action and refuses a forged one (403), and an action without the CSRF token is
refused. Screenshots of each step are saved under tests/artifacts/."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conveyor import Producer
from conveyor.web import WebTopics
from conveyor.web.access import hash_password
from integration.web.test_browser import (
    ARTIFACTS,
    chromium,
    eventually,
    free_port,
    get_json,
    stop_processes,
)

HERE = Path(__file__).parent
PASSWORD = "s3cret-for-the-browser-test"
XSS = '<script>window.__pwned = true</script><img src=x onerror="window.__pwned = true">'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
]  # xdist: see tests/conftest.py


@dataclass
class Site:
    url: str  # the UI behind the password
    read_only: str  # the read-only UI (open: the test reads the API through it)
    topic: str
    dlq: str
    healed: Path
    processed: Path

    def processed_offsets(self) -> list[str]:
        return self.processed.read_text().splitlines() if self.processed.exists() else []


@pytest.fixture
def site(
    kafka_bootstrap: str, new_topic: Callable[..., str], web_topics: WebTopics, tmp_path: Path
) -> Iterator[Site]:
    topic, dlq = new_topic(partitions=2), new_topic(partitions=1)
    ports = free_port(), free_port()
    healed, processed = tmp_path / "healed", tmp_path / "processed.txt"
    env = dict(
        os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, TOPIC=topic, GROUP=f"g-{topic}",
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"), DLQ_TOPIC=dlq,
        HEALED_FILE=str(healed), PROCESSED_FILE=str(processed),
        PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )  # fmt: skip
    quiet = {"cwd": HERE, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    web = [sys.executable, "-m", "conveyor", "web", "--app", "web_app:app"]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "conveyor", "server", "--app", "web_app:app"], env=env, **quiet
        ),  # type: ignore[call-overload]
        subprocess.Popen(
            [*web, "--port", str(ports[0])],
            env={**env, "CONVEYOR_WEB_PASSWORD_HASH": hash_password(PASSWORD)},
            **quiet,
        ),  # type: ignore[call-overload]
        subprocess.Popen(
            [*web, "--port", str(ports[1]), "--read-only", "--no-aggregate"], env=env, **quiet
        ),  # type: ignore[call-overload]
    ]
    read_only = f"http://127.0.0.1:{ports[1]}"
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [{"topic": topic, "partition": i % 2, "key": f"customer-{i % 5}",
                  "payload": {"order": i, "customer": f"customer-{i % 5}"}} for i in range(30)]
                + [{"topic": topic, "partition": 0, "key": f"bad-{i}", "payload": {"order": 100 + i}}
                   for i in range(3)]
                + [{"topic": topic, "partition": 1, "key": "xss", "payload": XSS.encode()}]
            )  # fmt: skip
        assert eventually(lambda: get_json(f"{read_only}/api/status")["ok"], 90), get_json(
            f"{read_only}/api/status"
        )
        assert eventually(lambda: get_json(f"{read_only}/api/dlq/{dlq}")["total"] == 3, 60)
        yield Site(f"http://127.0.0.1:{ports[0]}", read_only, topic, dlq, healed, processed)
    finally:
        stop_processes(*processes)


def test_sign_in_explore_export_command_and_redrive_and_read_only_refuses(site: Site) -> None:

    def shot(page: Any, name: str) -> None:
        page.screenshot(path=str(ARTIFACTS / f"web-{name}.png"), full_page=True)

    def ready(page: Any) -> None:
        page.wait_for_selector("body[data-ready='1']")

    with chromium() as browser:
        context = browser.new_context(
            viewport={"width": 1280, "height": 1000}, accept_downloads=True
        )
        page = context.new_page()

        # sign in: a closed UI sends the visitor to the login page, and back after it
        page.goto(f"{site.url}/explorer/{site.topic}")
        ready(page)
        assert "/login" in page.url
        page.fill("#password", "wrong")
        page.click("#sign-in")
        ready(page)
        assert "Wrong password" in page.locator("#login-problem").inner_text()
        shot(page, "login")
        page.fill("#password", PASSWORD)
        page.click("#sign-in")
        ready(page)
        assert page.url.endswith(f"/explorer/{site.topic}")
        assert page.locator("#user").inner_text() == "admin"

        # explore: filter by key, see exactly those messages, open one
        page.fill("#explorer-form input[name=newest]", "")
        page.fill("#explorer-form input[name=offset]", "0")
        page.fill("#explorer-form input[name=key]", "customer-2")
        page.click("#explore")
        ready(page)
        rows = page.locator("#messages tbody tr")
        assert rows.count() == 3, page.locator(
            "#messages"
        ).inner_text()  # orders 2, 12, 22 in partition 0
        assert all("customer-2" in text for text in rows.all_inner_texts())
        shot(page, "explorer")
        page.locator("#messages tbody tr td a").first.click()
        ready(page)
        decoded = page.locator("#payload-decoded").inner_text()
        assert json.loads(decoded)["customer"] == "customer-2"
        assert "\n  " in decoded, "pretty-printed"
        shot(page, "explorer-message")

        # export what the filter matches, as JSON lines
        page.go_back()
        ready(page)
        page.fill("#export-form input[name=limit]", "100")
        with page.expect_download() as downloading:
            page.click("#export")
        exported = Path(downloading.value.path()).read_text().splitlines()
        assert [json.loads(line)["key"] for line in exported] == ["customer-2"] * 3

        # a payload holding a script shows as text and never runs
        page.goto(f"{site.url}/explorer/{site.topic}?partition=1&newest=1")
        ready(page)
        page.locator("#messages tbody tr td a").first.click()
        ready(page)
        assert page.locator("#payload-decoded").inner_text() == XSS
        assert page.evaluate("window.__pwned === undefined")
        shot(page, "explorer-script-payload")

        # probe and quiet the running process from its page
        # (a busy machine may delay a report past three intervals: asked again meanwhile)
        running: list[dict[str, Any]] = []

        def one_running() -> bool:
            processes = page.request.get(f"{site.url}/api/processes").json()["processes"]
            running[:] = [p for p in processes if p["status"] == "running"]
            return bool(running)

        eventually(one_running, 30)
        [process] = running
        page.goto(f"{site.url}/processes/{process['id']}")
        ready(page)
        assert page.locator(".partition-actions .command-pause").count() == 2
        shot(page, "process-actions")
        page.click("#command-probe")
        ready(page)
        assert page.locator("#command-status").inner_text() == "done"
        threads = page.locator("#threads summary").all_inner_texts()
        assert any("MainThread" in name for name in threads), threads
        assert any("conveyor-web-commands" in name for name in threads), threads
        shot(page, "command-probe")

        # per partition: pause until a time (no zone: UTC), resume, seek to an offset
        page.goto(f"{site.url}/processes/{process['id']}")
        ready(page)
        row = page.locator("#partitions tbody tr").first
        row.locator("input[name=until]").fill("2099-01-01T00:00:00")
        row.locator(".command-pause").click()
        ready(page)
        assert page.locator("#command-status").inner_text() == "done"
        assert "2099-01-01T00:00:00+00:00" in page.locator("#command-result").inner_text()
        page.go_back()
        ready(page)
        row = page.locator("#partitions tbody tr").first
        row.locator(".command-resume").click()
        ready(page)
        assert page.locator("#command-status").inner_text() == "done"
        page.go_back()
        ready(page)
        row = page.locator("#partitions tbody tr").filter(  # partition 1: no dead letters
            has=page.locator("td:nth-child(2)", has_text=re.compile(r"^1$"))
        )
        row.locator("input[name=to]").fill("0")
        row.locator(".command-seek").click()
        ready(page)
        assert page.locator("#command-status").inner_text() == "done"
        assert "offset" in page.locator("#command-result").inner_text()
        shot(page, "command-seek")
        # redrive: the DLQ's group of three goes back, and the consumer takes them now
        page.goto(f"{site.url}/dlq")
        ready(page)
        assert site.dlq in page.locator("#dlqs").inner_text()
        page.click(f"#dlqs a:text('{site.dlq}')")
        ready(page)
        group = page.locator("#dlq-groups tbody tr").first.inner_text()
        assert site.topic in group
        assert "ValueError" in group
        shot(page, "dlq")
        ends = {
            p["partition"]: p["high"]
            for p in get_json(f"{site.read_only}/api/explorer/{site.topic}")["partitions"]
        }
        site.healed.touch()
        page.click(".redrive-group")
        ready(page)
        page.wait_for_selector("#redrive-facts[data-state='done']", timeout=60_000)
        assert page.locator("#redrive-moved").inner_text() == "3"
        shot(page, "redrive")

        def redriven_processed() -> bool:
            lines = [line.split() for line in site.processed_offsets()]
            return len({(p, o) for p, o in lines if int(o) >= ends[int(p)]}) == 3

        assert eventually(redriven_processed, 60), site.processed_offsets()

        # quiet the process: it finishes what runs and takes nothing new
        page.goto(f"{site.url}/processes/{process['id']}")
        ready(page)
        page.click("#command-quiet")
        ready(page)
        assert page.locator("#command-status").inner_text() == "done"
        assert "quiet" in page.locator("#command-result").inner_text()
        shot(page, "command-quiet")

        # quiet every process from the processes page, after a confirmation that says so
        # (the section lists the processes the reports show alive: a report delayed past
        # three intervals hides it for a moment, as above)
        def fleet_rows() -> int:
            page.goto(f"{site.url}/processes")
            ready(page)
            return int(page.locator("#fleet-groups tbody tr").count())

        eventually(lambda: fleet_rows() > 0, 30)
        assert page.locator("#fleet-groups tbody tr").count() == 1
        shot(page, "processes-fleet")
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.click("#fleet-quiet")
        ready(page)
        assert asked, "a confirmation first"
        assert "EVERY process" in asked[0]
        assert page.locator("#fleet-status").inner_text() == "done"
        answer = page.locator(f"#fleet-answers tr[data-process='{process['id']}']")
        assert answer.get_attribute("data-status") == "done"
        assert "quiet" in answer.inner_text()
        shot(page, "command-quiet-all")

        # no CSRF token: refused, even signed in
        refused = page.request.post(
            f"{site.url}/dlq/{site.dlq}/redrive", form={"all": "1"}, max_redirects=0
        )
        assert refused.status == 403

        # read-only: no action offered, a forged one refused
        page = context.new_page()
        page.goto(f"{site.read_only}/processes/{process['id']}")
        ready(page)
        assert page.locator("#read-only").count() == 1
        assert page.locator("#process-actions").count() == 0
        assert page.locator(".partition-actions").count() == 0
        page.goto(f"{site.read_only}/processes")
        ready(page)
        assert page.locator("#fleet-actions, #fleet-groups").count() == 0
        page.goto(f"{site.read_only}/dlq/{site.dlq}")
        ready(page)
        assert page.locator(".redrive-group, #redrive-selected, #redrive-all").count() == 0
        page.goto(f"{site.read_only}/explorer/{site.topic}/0/0")
        ready(page)
        assert page.locator("#republish-form").count() == 0
        shot(page, "read-only")
        forged = page.request.post(
            f"{site.read_only}/processes/{process['id']}/commands",
            form={"command": "stop", "csrf_token": csrf(page)},
        )
        assert forged.status == 403
        assert "read-only" in forged.text()


def csrf(page: Any) -> str:
    token: str = page.locator("meta[name=csrf-token]").get_attribute("content")
    return token
