"""The Stores page in headless Chromium with real data: a `conveyor server` counting per key
in a RocksDB store reports its store partitions, and `conveyor web` (a process without any
partition) shows them, looks a key up, which the server answers over the command channel,
and rebuilds a partition's copy from its changelog, which the server does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conveyor import Producer
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


def test_the_stores_page_lists_store_partitions_and_looks_a_key_up(
    kafka_bootstrap: str, new_topic: Callable[..., str], web_topics: WebTopics, tmp_path: Path
) -> None:

    topic = new_topic(partitions=2)
    port = free_port()
    env = dict(
        os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, TOPIC=topic, GROUP=f"g-{topic}",
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"),
        STATE_DIR=str(tmp_path / "state"),
        PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]),
    )  # fmt: skip
    quiet = {"cwd": HERE, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "server", "--app", "stores_web_app:app"], **quiet
    )  # type: ignore[call-overload]
    ui = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "web", "--app", "stores_web_app:app",
         "--port", str(port)], **quiet,
    )  # type: ignore[call-overload]  # fmt: skip
    site = f"http://127.0.0.1:{port}"
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [{"topic": topic, "key": f"user-{n % 4}", "payload": {"n": n}} for n in range(40)]
            )

        def counted() -> bool:  # both partitions reported, the 4 keys there (flushed)
            rows = get_json(f"{site}/api/stores")["partitions"]
            # RocksDB's estimate counts a key written by two flushes twice until compaction
            return len(rows) == 2 and sum(row["keys"] or 0 for row in rows) >= 4

        assert eventually(counted, 90), get_json(f"{site}/api/stores")["partitions"]
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            visit(page, f"{site}/stores")
            assert page.title().startswith("Stores")
            assert page.locator("#stores tbody tr[data-store='default']").count() == 1
            assert page.locator("#store-partitions tbody tr[data-store]").count() == 2
            page.fill("#store-lookup input[name='key']", "user-3")
            page.click("#store-lookup button[type='submit']")
            page.wait_for_selector("#lookup-result")
            shown = page.locator("#lookup-result pre.payload")
            assert shown.count() == 1, page.locator("#lookup-result").inner_text()
            assert shown.inner_text().strip() == "10", "the server counted user-3 ten times"
            page.screenshot(path=str(ARTIFACTS / "web-stores-1280.png"), full_page=True)
            page.set_viewport_size({"width": 1920, "height": 1000})
            page.screenshot(path=str(ARTIFACTS / "web-stores-1920.png"), full_page=True)
            # rebuild one partition's copy from its changelog: the server does it and the
            # next report shows the restore (every key of the partition came back)
            row = page.locator("#store-partitions tbody tr[data-partition='0']")
            before = get_json(f"{site}/api/stores")["partitions"]
            row.locator("button.command-rebuild").click()
            page.wait_for_load_state()
            assert "rebuild: done" in page.content(), page.locator("main").inner_text()

            def rebuilt() -> bool:
                rows = get_json(f"{site}/api/stores")["partitions"]
                return [r["last_restore"] for r in rows if r["partition"] == 0] != [
                    r["last_restore"] for r in before if r["partition"] == 0
                ]

            assert eventually(rebuilt, 30), get_json(f"{site}/api/stores")["partitions"]
    finally:
        stop_processes(server, ui)
