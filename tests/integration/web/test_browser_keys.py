"""Long and binary keys in the explorer, in headless Chromium at 1,280 px, with real messages:
the listing's key cell stays inside its table and its box (a cut key ends in "…" and holds
the whole key in its title; a binary key shows the start of its hex), and the message page
shows the whole key, wrapped, without widening the page. Screenshots under tests/artifacts/."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor import Producer
from conveyor.web import WebTopics
from integration.web.test_browser import (
    ARTIFACTS,
    chromium,
    eventually,
    free_port,
    get_json,
    stop_processes,
    visit,
)

HERE = Path(__file__).parent
LONG = "tenant-eu-west-1/customer-" + "0123456789abcdef" * 20  # 346 characters, no space
WORDS = " ".join(["a long key made of words"] * 14)  # 349 characters that may wrap
BINARY = bytes([0xFF, 0xFE]) + bytes(range(256)) * 2  # not UTF-8: shown as hex
KEYS: list[bytes] = [b"short", LONG.encode(), WORDS.encode(), BINARY]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.xdist_group("browser"),
]  # xdist: see tests/conftest.py


@pytest.fixture
def explorer(
    kafka_bootstrap: str, new_topic: Callable[..., str], web_topics: WebTopics
) -> Iterator[tuple[str, str]]:
    """A read-only `conveyor web` and a topic whose partition 0 holds a message per key of
    KEYS (offsets 0..3); (the UI's URL, the topic)."""
    topic = new_topic(partitions=1)
    port = free_port()
    env = dict(
        os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, TOPIC=topic, GROUP=f"g-{topic}",
        WEB_PREFIX=web_topics.reports.removesuffix("_consumers_reports"),
        PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )  # fmt: skip
    ui = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "web", "--app", "web_app:app", "--port", str(port),
         "--read-only", "--no-aggregate"],
        cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [
                    {"topic": topic, "partition": 0, "key": key, "payload": {"n": n}}
                    for n, key in enumerate(KEYS)
                ]
            )
        listed = f"{url}/api/explorer/{topic}"
        assert eventually(lambda: get_json(listed)["partitions"][0]["high"] == len(KEYS), 90)
        yield url, topic
    finally:
        stop_processes(ui)


# Each key cell: its right edge against its table's box, whether its text overflows the cell,
# its text and title.
CELLS = """
[...document.querySelectorAll('#messages tbody td.key')].map(cell => {
  const box = cell.closest('.scroll').getBoundingClientRect();
  const own = cell.getBoundingClientRect();
  return {right: own.right, boxRight: box.right, overflows: cell.scrollWidth > cell.clientWidth + 1,
          text: cell.innerText, title: cell.getAttribute('title')};
})
"""
WIDE = "document.documentElement.scrollWidth > window.innerWidth + 1"


def test_long_and_binary_keys_stay_in_the_layout_and_are_reachable_whole(
    explorer: tuple[str, str],
) -> None:

    url, topic = explorer
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        visit(page, f"{url}/explorer/{topic}?partition=0&offset=0")
        page.screenshot(path=str(ARTIFACTS / "web-explorer-long-keys.png"), full_page=True)
        cells: list[dict[str, Any]] = page.evaluate(CELLS)
        assert len(cells) == len(KEYS), cells
        for cell in cells:
            assert cell["right"] <= cell["boxRight"] + 1, ("outside its table", cell)
            assert not cell["overflows"], ("its text overflows the cell", cell)
        assert not page.evaluate(WIDE), "the page scrolls sideways"
        hidden = page.evaluate(
            "[...document.querySelectorAll('.scroll')]"
            ".filter(box => box.scrollWidth > box.clientWidth + 1).length"
        )
        assert hidden == 0, "a table scrolls sideways"
        short, long, words, binary = cells
        assert (short["text"], short["title"]) == ("short", None)
        for cell, whole in ((long, LONG), (words, WORDS)):
            assert cell["text"].endswith("…"), cell
            assert len(cell["text"]) < 100, cell
            assert whole.startswith(cell["text"].removesuffix("…")), cell
            assert cell["title"] == whole, "the whole key, on hover"
        assert binary["text"].startswith("ff fe 00 01 02"), binary
        assert "binary" in binary["text"]
        assert binary["title"] is not None
        assert binary["title"].startswith(BINARY[:16].hex(" ")), binary

        # the message page: the whole key, wrapped in its box
        for offset, whole in ((1, LONG), (2, WORDS), (3, BINARY[:16].hex(" "))):
            visit(page, f"{url}/explorer/{topic}/0/{offset}")
            page.screenshot(
                path=str(ARTIFACTS / f"web-explorer-long-key-{offset}.png"), full_page=True
            )
            shown = page.locator("#message-key").inner_text()
            assert whole in shown.replace("\n", ""), (offset, shown[:80])
            assert not page.evaluate(WIDE), f"the page of offset {offset} scrolls sideways"
            inside = page.evaluate(
                "(() => { const key = document.querySelector('#message-key');"
                " const facts = document.querySelector('#message-facts').getBoundingClientRect();"
                " return key.getBoundingClientRect().right <= facts.right + 1"
                " && key.scrollWidth <= key.clientWidth + 1; })()"
            )
            assert inside, f"the key of offset {offset} runs out of its box"
