"""The consumers built on the partition handle (a sink's, the scheduled messages') driven by
conveyor.testing: ``TestPartition`` has every member the engine's executor has."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from conveyor import App, testing
from conveyor.messages import Message
from conveyor.schedules.wire import cancel_message, schedule_message


class ListSink:
    """A sink that keeps what it was given."""

    def __init__(self) -> None:
        self.delivered: list[tuple[int, object]] = []

    def open(self) -> None:
        return None

    def deliver(self, records: Sequence[Message]) -> None:
        self.delivered.extend((record.offset, record.payload) for record in records)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


def new_app() -> App:
    return App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})


def test_a_sink_consumer_delivers_and_marks_under_testing() -> None:
    app = new_app()
    sink = ListSink()
    app.routes.sink("events", sink, batch_interval=0)
    consumer = testing.consumer_for(app, "events")
    for n in range(3):
        testing.produce(consumer, {"n": n})
    testing.consume(consumer)
    assert sink.delivered == [(0, {"n": 0}), (1, {"n": 1}), (2, {"n": 2})]
    assert testing.recorded(consumer).committed == 3


def test_the_scheduled_messages_consumer_loads_and_marks_under_testing() -> None:
    app = new_app()
    app.schedules.enable()
    consumer = testing.consumer_for(app, app.schedules.topic)  # the app's own
    later = datetime.now(UTC) + timedelta(hours=1)
    for n in range(2):
        _, message = schedule_message(later, topic="reminders", payload=b"x", id=f"s{n}")
        testing.produce(consumer, message["payload"], key=message["key"],
                        headers=message["headers"])  # fmt: skip
    testing.consume(consumer)
    assert app.schedules.pending() == 2
    assert testing.recorded(consumer).committed == 0  # held at the oldest pending schedule
    cancel = cancel_message("s0")
    testing.produce(consumer, None, key=cancel["key"], headers=cancel["headers"])
    testing.consume(consumer)
    assert app.schedules.pending() == 1
    assert testing.recorded(consumer).committed == 1  # s0's offset is behind it now
