"""The Stores page from folded reports, without a broker: each store partition a live process
reports with how far its copy is behind its changelog, a restore under way with its progress,
the dead processes' left out, and a key looked up (its answer, or why there is none)."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment

from conveyor import App, Consumer
from conveyor.errors import KafkaError
from conveyor.state import Store
from conveyor.web.ui.rendering import environment
from conveyor.web.ui.store_views import StoreViews
from conveyor.web.ui.views import Page

NOW = 1_000_000.0


class Counts(Consumer):
    def consume(self) -> None:
        pass


class FakeData:
    def __init__(self, states: dict[str, dict[str, Any]]) -> None:
        self._states = states

    def states(self) -> dict[str, dict[str, Any]]:
        return self._states


class FakeAdmin:
    def __init__(self, ends: dict[tuple[str, int], int]) -> None:
        self.ends = ends

    def read_watermark_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        if (topic, partition) not in self.ends:
            raise KafkaError(f"no {topic}")
        return 0, self.ends[(topic, partition)]


def _row(partition: int, **extra: Any) -> dict[str, Any]:
    return {"group": "g", "topic": "clicks", "partition": partition, "store": "default",
            "kind": "store", "keys": 40, "bytes": 4096, "offset": 90, "restoring": None,
            "last_restore": {"records": 7, "bytes": 70, "seconds": 0.25}, "late": 3,
            **extra}  # fmt: skip


def _app() -> Any:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9", "group.id": "g"})
    app.routes.topic("clicks", Counts, state=Store(backend="memory"))
    return app


def test_each_live_store_partition_with_what_its_copy_lacks_and_a_restore_under_way() -> None:
    states = {
        "p1": {"reported_at": NOW - 1, "interval": 5, "stores": [_row(0)]},
        "p2": {"reported_at": NOW - 1, "interval": 5, "stores": [
            _row(1, offset=None, keys=None, bytes=None, last_restore=None,
                 restoring={"records": 300, "offset": 400, "end": 1000})]},
        "gone": {"reported_at": NOW - 60, "interval": 5, "stores": [_row(2)]},
    }  # fmt: skip
    changelog = "g-clicks-default-changelog"
    views = StoreViews(
        _app(), FakeData(states), lambda: FakeAdmin({(changelog, 0): 100}), clock=lambda: NOW
    )
    page = views.page(None, None)
    assert [d["changelog"] for d in page.data["declared"]] == [changelog]
    rows = page.data["partitions"]
    assert [(r["partition"], r["process"]) for r in rows] == [(0, "p1"), (1, "p2")]
    assert rows[0]["behind"] == 10, "the changelog's end minus the copy's offset"
    assert rows[1]["progress"] == 300 / 900, "300 read, 600 left"
    html = _render(page)
    assert "restoring: 300 records (33 %)" in html
    assert html.count('class="command-rebuild"') == 2, "each partition's copy can be rebuilt"
    assert 'name="command" value="rebuild"' in html
    assert "7 records in" in html


def test_a_key_is_looked_up_or_says_why_not() -> None:
    app = _app()
    answers = {"k1": 12}

    def get(store: str, key: str, default: Any = None, **_: Any) -> Any:
        if key == "down":
            raise KafkaError("no process answered")
        return answers.get(key, default)

    app.stores.get = get  # the lookup's path is tested against the broker (test_queries)
    views = StoreViews(app, FakeData({}), lambda: FakeAdmin({}), clock=lambda: NOW)
    found = views.page("clicks/default", "k1").data["lookup"]
    assert (found["found"], found["value"], found["topic"]) == (True, "12", "clicks")
    assert views.page("clicks/default", "k2").data["lookup"]["found"] is False
    assert "no process answered" in views.page("clicks/default", "down").data["lookup"]["error"]
    html = _render(views.page("clicks/default", "k1"))
    assert 'id="lookup-result"' in html
    assert '<pre class="payload">12</pre>' in html


def _render(page: Page) -> str:
    env: Environment = environment()
    template = env.get_template("stores.html")
    return template.render(
        **page.data, title=page.title, active="stores", base="", client_id="t",
        request=None, csrf_field="csrf", csrf_token="x", user=None, read_only=False,
        can=lambda action, target="": True,
    )  # fmt: skip
