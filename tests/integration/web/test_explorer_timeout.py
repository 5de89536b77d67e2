"""The explorer against the real broker, when a read runs out of time: one message that is
there, read through a client the broker makes wait (its fetches ask for more bytes than the
partition holds, so the broker answers only after ``fetch.wait.max.ms``, longer than the
explorer's deadline), is answered "timed out" with a 504, as a page, as JSON and for a
republish; never "not found". The same message through a client that is not held back is
found, and an offset past the end is still a 404."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import pytest
from starlette.testclient import TestClient

from conveyor import App, Producer
from conveyor.web.reading.explorer import Explorer
from conveyor.web.ui import rendering


def ui_of(app: App, timeout: float) -> TestClient:
    """The app's web UI, its explorer's reads bounded by ``timeout`` seconds."""
    with pytest.MonkeyPatch.context() as patch:  # the UI builds its explorer with it
        patch.setattr(rendering, "Explorer", partial(Explorer, timeout=timeout))
        return TestClient(app.web.asgi())


def test_a_read_that_times_out_says_so_with_a_504_not_a_404(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for n in range(3):
            producer.produce_sync(topic=topic, partition=0, payload=f"message {n}")
    held = App(client_id="explorer-held", kafka={
        "bootstrap.servers": kafka_bootstrap,
        "fetch.min.bytes": 100_000_000,  # more than the partition holds: the broker waits ...
        "fetch.wait.max.ms": 6_000,  # ... this long before it answers a fetch
    })  # fmt: skip
    plain = App(client_id="explorer-plain", kafka={"bootstrap.servers": kafka_bootstrap})
    held_ui, plain_ui = ui_of(held, 1.0), ui_of(plain, 30.0)
    try:
        found = plain_ui.get(f"/api/explorer/{topic}/0/1")
        assert found.status_code == 200, found.text
        assert found.json()["message"]["payload"]["text"] == "message 1", "it is there"

        answer = held_ui.get(f"/api/explorer/{topic}/0/1")
        assert answer.status_code == 504, answer.text
        assert answer.json()["timed_out"] is True
        assert f"reading {topic}/0@1 timed out" in answer.json()["error"]

        page = held_ui.get(f"/explorer/{topic}/0/1")
        assert page.status_code == 504
        assert "Timed out" in page.text
        assert "Not found" not in page.text

        token = re.search(r'name="csrf-token" content="([^"]+)"', held_ui.get("/login").text)
        assert token
        republished = held_ui.post(f"/api/explorer/{topic}/0/1/republish", json={},
                                   headers={"X-CSRF-Token": token.group(1)})  # fmt: skip
        assert republished.status_code == 504, republished.text

        past = plain_ui.get(f"/api/explorer/{topic}/0/3")
        assert past.status_code == 404, "past the end: no message, said at once"
    finally:
        for client, app in ((held_ui, held), (plain_ui, plain)):
            client.close()
            app.web.data.stop()
