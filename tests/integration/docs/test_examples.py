"""Every code block of the docs and the README runs as a reader would run it (see
``tests/docs_examples.py`` for how a block says what it is), against the real broker: an
example that raises, a fragment that names something defined nowhere, or a page that breaks
fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conveyor import Admin
from conveyor.errors import KafkaError

pytestmark = pytest.mark.xdist_group("docs")  # xdist: see tests/conftest.py

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "tests" / "docs_examples.py"
PAGE_SECONDS = 150  # the slowest page takes about 10 s here
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")], key=lambda p: str(p.relative_to(ROOT))
)


# Topics the pages make without naming them in quotes: the example shop's (its dead letter
# queue and job queue too), a job queue's, and the default schedules, recurring and web UI
# topics (an app's own schedules topic: see _page_topics).
_DERIVED = {
    "shop-orders", "shop-payments", "shop-orders-dlq", "jobs-mail", "jobs-mail-dead",
    "jobs-mail-dead-discarded", "jobs-emails", "jobs-emails-dead",
    "jobs-emails-dead-discarded", "jobs-receipts", "jobs-receipts-dead",
    "jobs-receipts-dead-discarded", "conveyor_schedules", "conveyor_recurring",
    "conveyor_consumers_reports", "conveyor_consumers_states", "conveyor_consumers_metrics",
    "conveyor_errors", "conveyor_consumers_commands",
}  # fmt: skip
_NAMED = re.compile(r'"([A-Za-z0-9][A-Za-z0-9._-]*)"|topics create ([A-Za-z0-9._-]+)')


def _page_topics() -> set[str]:
    """Every topic some page may make: the names the pages write in quotes or give to
    `conveyor topics create`, and :data:`_DERIVED`. The suite's own topics, made by the
    tests that run beside the pages (other xdist workers), have unique names and are never
    among them."""
    names = set(_DERIVED)
    for page in PAGES:
        for quoted, created in _NAMED.findall(page.read_text()):
            names.add(quoted or created)
            if quoted:  # an app named so (client_id="shop") keeps its schedules there
                names.add(f"{quoted}_schedules")
    return names


PAGE_TOPICS = _page_topics()


def _delete_topics_of(page: Path, admin: Admin) -> None:
    """The pages name their topics and apps plainly ("orders"): each page starts without the
    topics an earlier page made and without the consumer groups of its apps (a group is named
    after its app's client_id), left by an earlier run on the development broker's folder or by
    `make run`: offsets committed there would start the page's steps in the middle. Nothing
    else is touched."""
    made = [t for t in admin.list_topics() if t in PAGE_TOPICS]
    for group in admin.list_consumer_groups():
        if group in PAGE_TOPICS:
            _delete_group(group, admin)
    for name in made:
        admin.delete_topic(name)
    pause = threading.Event()
    for _ in range(100):  # deletion is asynchronous: wait until they are gone (10 s at most)
        if not set(made) & set(admin.list_topics()):
            break
        pause.wait(0.1)


def _delete_group(group: str, admin: Admin) -> None:
    """Delete a page's consumer group once its last member is gone. A client closed while its
    first JoinGroup was in flight cannot leave: the broker keeps it as a pending member until
    its session times out (10 s for a connect worker, 45 s for Kafka's default), and answers
    NON_EMPTY_GROUP until then. The connect-workers page stops a worker a fraction of a second
    after starting it: one run in a few ends so here."""
    deadline = time.monotonic() + 90
    pause = threading.Event()
    while True:
        try:
            admin.delete_consumer_group(group)
            return
        except KafkaError as error:
            if error.name == "GROUP_ID_NOT_FOUND":
                return  # emptied and removed since it was listed
            if error.name != "NON_EMPTY_GROUP" or time.monotonic() > deadline:
                raise
        pause.wait(0.5)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_of_the_page_runs(page: Path, kafka_bootstrap: str, kafka_admin: Admin) -> None:
    _delete_topics_of(page, kafka_admin)
    environment = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    try:
        run = subprocess.run(
            [sys.executable, str(RUNNER), str(page)], capture_output=True, text=True,
            timeout=PAGE_SECONDS, env=environment, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as hung:
        pytest.fail(
            f"the page's blocks did not finish within {PAGE_SECONDS} s; done so far:\n"
            f"{_text(hung.stdout)}\nthreads before the kill:\n{_text(hung.stderr)[-8000:]}"
        )
    print(run.stdout)
    assert run.returncode == 0, (run.stdout + run.stderr)[-8000:]


def _text(output: bytes | str | None) -> str:
    return output.decode() if isinstance(output, bytes) else (output or "")
