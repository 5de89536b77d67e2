"""The pages' names and addresses, without a broker: the engine's batches and the background
jobs are two pages, and the engine page's old address (``/jobs``, when it was "Jobs") sends
old links and bookmarks on to it."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from conveyor import App
from conveyor.web.ui.rendering import NAVIGATION


def new_app() -> App:
    return App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:1"})


def test_the_engines_batches_and_the_background_jobs_are_two_pages() -> None:
    assert ("batches", "Batches", "/batches") in NAVIGATION
    assert ("background_jobs", "Background jobs", "/background-jobs") in NAVIGATION
    assert "Jobs" not in [label for _, label, _ in NAVIGATION], "one name, one meaning"


@pytest.mark.parametrize(
    ("old", "new"),
    [("/jobs", "/batches"), ("/jobs?x=1", "/batches?x=1"), ("/api/jobs", "/api/batches")],
)
def test_the_old_jobs_address_redirects_to_the_batches(old: str, new: str) -> None:
    client = TestClient(new_app().web.asgi(), follow_redirects=False)
    moved = client.get(old)
    assert moved.status_code == 301
    assert moved.headers["location"] == new


def test_mounted_the_redirect_stays_under_the_mount() -> None:
    host = Starlette(routes=[Mount("/conveyor", app=new_app().web.asgi())])
    moved = TestClient(host, follow_redirects=False).get("/conveyor/jobs")
    assert moved.status_code == 301
    assert moved.headers["location"] == "/conveyor/batches"
