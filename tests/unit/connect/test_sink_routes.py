"""Sink routes: declared with clear errors, and what the sink's answers do to offsets, dead
letters and retries (on the virtual partitions engine, with a fake listener)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from conveyor import App, ConfigurationError
from conveyor.connect import Reject, Retry, SinkBinding
from conveyor.connect.consumer import sink_consumer
from conveyor.messages import Message
from unit.processing.fakes import FakeRaw, rig


class Collecting:
    """A sink that records what it got and answers from a script."""

    def __init__(self, answers: dict[int, Any] | None = None, fail_first: int = 0) -> None:
        self.delivered: list[int] = []
        self.answers = answers or {}
        self.fail_first = fail_first
        self.calls = 0

    def open(self) -> None: ...

    def deliver(self, records: Sequence[Message]) -> list[Any] | None:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise ConnectionError("down")
        results = [self.answers.pop(record.offset, None) for record in records]
        self.delivered.extend(r.offset for r, a in zip(records, results, strict=True) if a is None)
        return results

    def flush(self) -> None: ...

    def close(self) -> None: ...


def routes() -> Any:
    return App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"}).routes


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"ordering": "random"}, "ordering"),
        ({"lanes": 0}, "lanes"),
        ({"batch_interval": -1}, "batch_interval"),
        ({"retries": 2}, "retries"),
        ({"max_in_flight": 0}, "max_in_flight"),
    ],
)
def test_bad_sink_options_are_named(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        routes().sink("orders", Collecting(), **options)
    assert raised.value.setting == named


def test_something_that_is_not_a_sink_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="is not a sink"):
        routes().sink("orders", object())


def test_a_sink_route_runs_on_lanes_by_key() -> None:
    r = routes()
    route = r.sink("orders", Collecting(), lanes=16, max_batch=50, batch_interval=0.02)
    assert route.virtual_partitions is not None
    assert route.virtual_partitions.max_partitions == 16
    assert route.virtual_partitions.linger == 0.02
    assert route.max_messages == 50
    assert [binding.topic for binding in r.sinks] == ["orders"]
    assert (
        r.sink("other", Collecting(), ordering="partition").virtual_partitions.max_partitions == 1
    )


def sink_rig(sink: Collecting, **options: Any) -> Any:
    consumer = sink_consumer(SinkBinding("orders", sink, asynchronous=False), rejectable=True)
    return rig(
        consumer,
        virtual_partitions={"max_partitions": 1},
        dead_letter_queue={
            "topic": "orders-dlq",
            "max_retries": 5,
            "dispatch_method": "produce_sync",
        },
        **options,
    )


def test_delivered_records_are_marked() -> None:
    sink = Collecting()
    r = sink_rig(sink)
    r.executor.add([FakeRaw(o) for o in range(5)], high_watermark=5)
    r.listener.run_jobs()
    assert sink.delivered == [0, 1, 2, 3, 4]
    assert r.executor.marked == 5


def test_a_rejected_record_goes_to_the_dead_letter_queue_with_the_reason() -> None:
    sink = Collecting({2: Reject("HTTP 422: no such customer")})
    r = sink_rig(sink)
    r.executor.add([FakeRaw(o) for o in range(5)], high_watermark=5)
    r.listener.run_jobs()
    [(method, dead)] = r.producer.calls
    assert method == "produce_sync"
    headers = dict(dead["headers"])
    assert headers["original_offset"] == "2"
    assert headers["original_error_message"] == "HTTP 422: no such customer"
    assert sink.delivered == [0, 1, 3, 4]
    assert r.executor.marked == 5


def test_a_retry_answer_retries_from_that_record_after_the_back_off() -> None:
    sink = Collecting({2: Retry("HTTP 503")})
    r = sink_rig(sink)
    r.executor.add([FakeRaw(o) for o in range(5)], high_watermark=5)
    r.listener.run_jobs()
    assert r.executor.marked == 2, "0 and 1 were delivered; 2 was not"
    assert r.timers.delays() == [1.0]
    r.timers.fire()
    r.listener.run_jobs()
    assert sink.delivered == [0, 1, 3, 4, 2, 3, 4], "from 2 on, again (at least once)"
    assert r.executor.marked == 5


def test_a_sink_that_raises_pauses_the_partition_and_retries() -> None:
    sink = Collecting(fail_first=2)
    r = sink_rig(sink)
    r.executor.add([FakeRaw(o) for o in range(3)], high_watermark=3)
    r.listener.run_jobs()
    r.timers.fire()
    r.listener.run_jobs()
    assert r.timers.history == [1.0, 2.0], "the route's back-off, growing"
    r.timers.fire()
    r.listener.run_jobs()
    assert sink.delivered == [0, 1, 2]
    assert r.executor.marked == 3


@pytest.mark.parametrize("ordering", ["key", "partition", "none"])
@pytest.mark.parametrize("dead_letter_queue", [None, "orders-dlq"])
def test_a_route_tells_a_sink_that_asks_its_topic_ordering_and_dead_letters(
    ordering: str, dead_letter_queue: str | None
) -> None:
    told: list[tuple[str, str, bool]] = []

    class Asking(Collecting):
        def use_route(self, topic: str, value: str, dead_letters: bool) -> None:
            told.append((topic, value, dead_letters))

    routes().sink("orders", Asking(), ordering=ordering, dead_letter_queue=dead_letter_queue)
    assert told == [("orders", ordering, dead_letter_queue is not None)]


def test_one_webhook_on_two_routes_is_refused_and_named() -> None:
    from conveyor.connect.sinks import Webhook  # noqa: PLC0415

    app_routes = routes()
    sink = Webhook("http://127.0.0.1:9/hook")
    app_routes.sink("orders", sink, ordering="key")
    with pytest.raises(ConfigurationError) as raised:
        app_routes.sink("payments", sink, ordering="key")
    assert raised.value.setting == "sink"
    assert "routes.sink('payments')" in str(raised.value)
