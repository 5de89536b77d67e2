"""Prometheus metrics scraped over HTTP while a real app consumes: the lag of a group that is
behind, counters that move as messages flow, retries and dead letters, librdkafka's
statistics as gauges."""

from __future__ import annotations

import re
import threading
import urllib.request
import uuid

from conveyor import App, Consumer
from helpers import Record, running


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return response.read().decode()


def value(text: str, name: str, **labels: str) -> float | None:
    """The sample ``name{labels...}`` (labels matched as a subset), or None."""
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        if all(found.get(key) == wanted for key, wanted in labels.items()):
            return float(match.group(3))
    return None


def make_app(bootstrap: str, **kafka: object) -> App:
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": f"metrics-{uuid.uuid4().hex[:6]}",
        **kafka,
    }
    return App(client_id="measured", kafka=settings, max_wait_time=0.05, max_messages=5)


def test_a_scrape_shows_the_lag_of_a_group_behind_and_counters_moving(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    release = threading.Event()
    seen = Record()

    batches = Record()

    class Slow(Consumer):
        def consume(self) -> None:
            assert release.wait(60)
            batches.add(len(self.messages))
            seen.add(*(message.offset for message in self.messages))

    app = make_app(kafka_bootstrap)
    app.routes.topic(topic, Slow)
    port = app.metrics.serve(port=0)
    app.producer.produce_many_sync([{"topic": topic, "payload": b"m"} for _ in range(50)])
    started = Record()
    app.monitor.subscribe("consumer.consume", lambda _event: started.add(1))
    with running(app):
        try:
            assert started.wait_for(lambda items: len(items) >= 1)
            behind = scrape(port)
        finally:
            release.set()  # a failed check must not leave the consumer blocked for a minute
        group = app.routes.default_group
        labels = {"consumer_group": group, "topic": topic, "partition": "0"}
        assert value(behind, "conveyor_consumer_lag_messages", **labels) == 50
        lag_seconds = value(behind, "conveyor_consumer_lag_seconds", **labels)
        assert lag_seconds is not None
        assert lag_seconds > 0
        assert (
            value(
                behind, "messaging_client_consumed_messages_total", messaging_destination_name=topic
            )
            is None
        )
        assert value(behind, "conveyor_workers_busy") == 1
        sent = value(
            behind,
            "messaging_client_sent_messages_total",
            messaging_destination_name=topic,
            error_type="",
        )
        assert sent == 50

        assert seen.wait_for(lambda offsets: len(set(offsets)) == 50)
        caught_up = scrape(port)
        consumed = value(
            caught_up,
            "messaging_client_consumed_messages_total",
            messaging_destination_name=topic,
            messaging_consumer_group_name=group,
        )
        assert consumed == 50
        assert value(caught_up, "conveyor_consumer_lag_messages", **labels) == 0
        assert value(caught_up, "conveyor_consumer_lag_seconds", **labels) == 0
        # As many batches as consume() saw (10 of max_messages=5, or 11 when the first came
        # alone after the listener's wait), holding the 50 messages.
        count = len(batches.items)
        assert max(batches.items) <= 5
        assert count >= 10
        assert value(caught_up, "conveyor_batch_size_count", topic=topic) == count
        assert value(caught_up, "conveyor_batch_size_sum", topic=topic) == 50
        assert (
            value(
                caught_up,
                "messaging_process_duration_seconds_count",
                messaging_destination_name=topic,
                error_type="",
            )
            == count
        )
        assert (
            value(caught_up, "conveyor_job_duration_seconds_count", topic=topic, hook="consume")
            == count
        )


def test_retries_dead_letters_and_errors_are_counted(kafka_bootstrap: str, new_topic) -> None:
    topic, dlq = new_topic(), new_topic()
    dispatched = threading.Event()

    class Failing(Consumer):
        def consume(self) -> None:
            raise ValueError("no")

    app = App(
        client_id="measured",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"metrics-{uuid.uuid4().hex[:6]}"},
        max_wait_time=0.05,
        pause_timeout=0.05,
        pause_max_timeout=0.05,
    )
    app.routes.topic(topic, Failing, dead_letter_queue={"topic": dlq, "max_retries": 2})
    app.monitor.subscribe("dead_letter_queue.dispatched", lambda _event: dispatched.set())
    app.metrics.enable()
    app.producer.produce_sync(topic=topic, payload=b"poison")
    with running(app):
        assert dispatched.wait(60)
    text = app.metrics.exposition().decode()
    assert value(text, "conveyor_retries_total", topic=topic) == 2
    assert value(text, "conveyor_dead_letter_dispatches_total", topic=topic, dlq_topic=dlq) == 1
    assert value(text, "conveyor_errors_total", type="consumer.consume.error") == 3
    failed = value(
        text,
        "messaging_process_duration_seconds_count",
        messaging_destination_name=topic,
        error_type="ValueError",
    )
    assert failed == 3


def test_librdkafka_statistics_become_gauges(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()

    class Idle(Consumer):
        def consume(self) -> None:
            pass

    app = make_app(kafka_bootstrap, **{"statistics.interval.ms": 200})
    app.routes.topic(topic, Idle)
    app.metrics.enable()
    reported = Record()
    app.monitor.subscribe("statistics.emitted", lambda event: reported.add(event["statistics"]))
    app.producer.produce_sync(topic=topic, payload=b"m")

    def round_trips(items: list[dict]) -> bool:
        return any(
            broker.get("nodeid", -1) != -1 and broker["rtt"]["cnt"]
            for statistics in items
            for broker in statistics["brokers"].values()
        )

    with running(app):
        # A window with no request completed to a broker has no round trips in it: wait for one.
        assert reported.wait_for(round_trips)
        text = app.metrics.exposition().decode()
    assert value(text, "conveyor_librdkafka_broker_rtt_seconds", stat="avg") is not None
    assert value(text, "conveyor_librdkafka_queue_messages") is not None
