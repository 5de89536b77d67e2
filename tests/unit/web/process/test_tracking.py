"""The tracker's errors: none lost while its first check of the topics is still running."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from conveyor.instrumentation import events as ev
from conveyor.instrumentation.monitor import Event
from conveyor.serialization import json_loads
from conveyor.web.process.tracking import Tracker
from conveyor.web.topics import WebTopics

TOPICS = WebTopics.prefixed("t")


class FakeApp:
    """What the tracker uses of an App: its client id, admin and producer."""

    def __init__(self, existing: list[str]) -> None:
        self.settings = SimpleNamespace(client_id="shop")
        self.admin = SimpleNamespace(list_topics=lambda: existing)
        self.sent: list[dict[str, Any]] = []
        self.producer = SimpleNamespace(produce_async=lambda **kw: self.sent.append(kw))


def failure(offset: int) -> Event:
    return Event(
        ev.ERROR_OCCURRED,
        {"type": "consumer.consume.error", "error": ValueError(f"bad {offset}"),
         "topic": "orders", "partition": 0, "offset": offset},
    )  # fmt: skip


def test_an_error_before_the_first_check_is_published_once_the_topics_are_found() -> None:
    app = FakeApp(existing=list(TOPICS.names))
    tracker = Tracker(app, TOPICS, interval=5.0)  # type: ignore[arg-type]
    tracker._error(failure(3))  # the consumer failed before the tracker's thread looked
    assert app.sent == []
    tracker._check_topics()
    assert [json_loads(sent["payload"])["offset"] for sent in app.sent] == [3]
    assert app.sent[0]["topic"] == TOPICS.errors
    tracker._error(failure(4))
    assert [json_loads(sent["payload"])["offset"] for sent in app.sent] == [3, 4]


def test_errors_before_the_check_are_dropped_when_the_topics_are_missing() -> None:
    app = FakeApp(existing=[])
    tracker = Tracker(app, TOPICS, interval=5.0)  # type: ignore[arg-type]
    tracker._error(failure(3))
    tracker._check_topics()
    tracker._error(failure(4))
    assert app.sent == []
    assert not tracker.installed
