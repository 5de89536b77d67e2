"""The monitor delivers events to their listeners, isolates failing listeners, and costs
nothing for events nobody listens to."""

from __future__ import annotations

import pytest

from conveyor import Event, Monitor
from conveyor.instrumentation import events


def test_listeners_get_their_events_with_payload() -> None:
    monitor = Monitor()
    received: list[Event] = []
    monitor.subscribe("message.acknowledged", received.append)
    monitor.instrument("message.acknowledged", topic="t", offset=3)
    monitor.instrument("message.purged", topic="t")
    assert [event.name for event in received] == ["message.acknowledged"]
    assert received[0]["offset"] == 3
    assert "time" in received[0]


def test_subscribed_tracks_listeners_and_star() -> None:
    monitor = Monitor()
    assert "message.acknowledged" not in monitor.subscribed
    unsubscribe = monitor.subscribe("message.acknowledged", lambda event: None)
    assert monitor.listening("message.acknowledged")
    unsubscribe()
    assert not monitor.listening("message.acknowledged")
    monitor.subscribe("*", lambda event: None)
    assert "anything.at_all" in monitor.subscribed


def test_a_failing_listener_is_reported_and_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = Monitor()
    errors: list[Event] = []
    after: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("listener bug")

    monitor.subscribe("transaction.committed", broken)
    monitor.subscribe("transaction.committed", after.append)
    monitor.subscribe(events.ERROR_OCCURRED, errors.append)
    monitor.instrument("transaction.committed", producer_id="p")
    assert len(after) == 1
    assert errors[0]["type"] == "monitor.listener.error"
    assert "listener bug" in caplog.text


def test_event_names_are_dotted_and_complete() -> None:
    assert "message.acknowledged" in events.EVENTS
    assert all("." in name and name == name.lower() for name in events.EVENTS)
    assert "consumer.consumed" in events.EVENTS
