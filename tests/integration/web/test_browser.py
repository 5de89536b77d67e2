"""Every page of a running app's web UI in headless Chromium (Debian's package, driven by
Playwright): `conveyor server` and `conveyor web` run as subprocesses; each page is opened at
1,280 and 1,920 px, checked for its title and key elements with real data, and saved as a
screenshot under tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from conveyor import Producer
from conveyor.web import WebTopics
from helpers import free_port

HERE = Path(__file__).parent
ARTIFACTS = HERE.parent.parent / "artifacts"
CHROMIUM = os.environ.get("CONVEYOR_CHROMIUM", "/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
]  # xdist: see tests/conftest.py


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (Debian's, which ``make test`` installs) driven by Playwright, closed
    after; screenshots go to ``ARTIFACTS``."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM} (make test installs it)")
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - a dev dependency

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        try:
            yield browser
        finally:
            browser.close()


def visit(page: Any, url: str) -> None:
    """Open ``url`` in ``page``: answered 200, and its data shown (``data-ready``)."""
    response = page.goto(url)
    assert response is not None, url
    assert response.status == 200, (url, response.status)
    page.wait_for_selector("body[data-ready='1']")


def stop_processes(*processes: subprocess.Popen[Any]) -> None:
    """SIGTERM each server, then wait for it (killed after 30 s)."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def eventually(check: Callable[[], bool], timeout: float) -> bool:
    """Ask a remote server again after short pauses until ``check()`` holds (bounded)."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.25)):
        try:
            if check():
                return True
        except (OSError, urllib.error.URLError, ValueError):
            pass
        pause.wait(0.25)
    return False


@pytest.fixture
def site(
    kafka_bootstrap: str, new_topic: Callable[..., str], web_topics: WebTopics
) -> Iterator[str]:
    """A running shop (2 processes' worth of data: one server) and its web UI; the URL."""
    topic = new_topic(partitions=2)
    port = free_port()
    env = dict(
        os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, TOPIC=topic, GROUP=f"g-{topic}",
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"), FAIL_OFFSET="3",
        PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        # The pages are read once each: a process silent for three intervals shows as dead,
        # and a loaded machine delayed a report past three of web_app's 0.5 s.
        TRACKING_INTERVAL="2",
    )  # fmt: skip
    quiet = {"cwd": HERE, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "server", "--app", "web_app:app"], **quiet
    )  # type: ignore[call-overload]
    ui = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "web", "--app", "web_app:app", "--port", str(port)],
        **quiet,
    )  # type: ignore[call-overload]
    url = f"http://127.0.0.1:{port}"
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [
                    {"topic": topic, "key": f"customer-{i % 5}", "payload": {"order": i}}
                    for i in range(40)
                ]
            )
        assert eventually(lambda: get_json(f"{url}/api/status")["ok"], 90), get_json(
            f"{url}/api/status"
        )
        assert eventually(lambda: get_json(f"{url}/api/errors")["paging"]["total"] >= 1, 60)
        yield url
    finally:
        stop_processes(server, ui)


PAGES = [
    # path, title, selectors that must show real data (the details add a screenshot name)
    (
        "/",
        "Dashboard",
        ["#count-processes .value", "#chart-throughput svg polyline", "#chart-rss svg polyline"],
    ),
    ("/processes", "Processes", ["#processes tbody tr[data-process] .badge.running"]),
    ("/batches", "Batches", ["#slowest-batches tbody tr td a"]),
    ("/background-jobs", "Background jobs", []),  # web_app has none: the page says how
    ("/routing", "Routing", ["table.routing tbody tr"]),
    ("/lags", "Lags", ["#topic-lags tbody tr[data-topic]", "#partition-lags tbody tr"]),
    ("/errors", "Errors", ["#errors tbody tr td a"]),
    ("/topics", "Topics", ["#topics tbody tr[data-topic]"]),
    ("/cluster", "Cluster", ["#brokers tbody tr", "#broker-configs tbody tr"]),
    ("/status", "Status", ["#checks tbody tr[data-check]", "#overall.ok"]),
]


def test_every_page_shows_real_data_at_two_widths(site: str) -> None:

    def measured() -> list[dict[str, Any]]:
        """Running processes whose latency stages reached the UI (a report or two after
        their first batch)."""
        return [
            p
            for p in get_json(f"{site}/api/processes")["processes"]
            if p["status"] == "running"
            and get_json(f"{site}/api/processes/{quote(p['id'], safe='')}")["latency"]
        ]

    assert eventually(lambda: bool(measured()), 30)
    running = measured()[0]
    error = get_json(f"{site}/api/errors")["errors"][0]
    topic = next(t for t in get_json(f"{site}/api/lags")["topics"])["topic"]
    details = [
        (
            f"/processes/{running['id']}",
            "Process",
            ["#process-facts", "#partitions tbody tr", "#latency tbody tr"],
            "process",
        ),
        (f"/errors/{error['id']}", "Error", ["#traceback"], "error"),
        (
            f"/topics/{topic}",
            f"Topic {topic}",
            ["#distribution svg rect", "#partitions tbody tr", "#configs tbody tr"],
            "topic",
        ),
    ]
    with chromium() as browser:
        for width in (1280, 1920):
            page = browser.new_page(viewport={"width": width, "height": 1000})
            for path, title, selectors, *named in PAGES + details:
                name = named[0] if named else path.strip("/") or "dashboard"
                visit(page, site + path)
                assert page.title().startswith(title), (path, page.title())
                for selector in selectors:
                    assert page.locator(selector).count() >= 1, (path, selector)
                # no horizontal scrolling of the page itself (wide tables scroll in their box)
                assert page.evaluate(
                    "document.documentElement.scrollWidth <= window.innerWidth + 1"
                ), path
                page.screenshot(path=str(ARTIFACTS / f"web-{name}-{width}.png"), full_page=True)
                if path in ("/routing", "/lags", "/processes") or path.startswith("/processes/"):
                    # every column in view, none behind a scroll (long names wrap)
                    hidden = page.evaluate(
                        "[...document.querySelectorAll('.scroll')]"
                        ".filter(box => box.scrollWidth > box.clientWidth + 1)"
                        ".map(box => [box.firstElementChild.id || box.firstElementChild.className,"
                        " box.scrollWidth - box.clientWidth])"
                    )
                    assert hidden == [], (path, width, hidden)
            page.close()

        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        visit(page, f"{site}/errors")
        shown = page.locator("#errors time").first.inner_text()
        assert "UTC" not in shown  # turned into the browser's zone
        # the error the consumer raised, with its traceback one click away
        page.locator("#errors tbody tr td a").first.click()
        assert "order at offset 3 has no customer" in page.locator("#error-facts").inner_text()
        assert "reject_order" in page.locator("#traceback").inner_text()

        visit(page, f"{site}/topics")
        header = page.locator("#topics thead th", has_text="partitions")
        header.click()
        assert header.get_attribute("aria-sort") == "ascending"
        counts = [
            int(text) for text in page.locator("#topics tbody tr td:nth-child(2)").all_inner_texts()
        ]
        assert counts == sorted(counts)
        header.click()
        counts = [
            int(text) for text in page.locator("#topics tbody tr td:nth-child(2)").all_inner_texts()
        ]
        assert counts == sorted(counts, reverse=True)

        page.goto(f"{site}/topics/{topic}")
        assert "DEFAULT_CONFIG" in page.locator("#configs").inner_text()  # a source by name

        response = page.goto(f"{site}/processes/no-such-process")
        assert response is not None
        assert response.status == 404
        assert "no process 'no-such-process'" in page.locator("#message").inner_text()
        response = page.goto(f"{site}/topics/no-such-topic")
        assert response is not None
        assert response.status == 404
