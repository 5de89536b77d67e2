"""librdkafka's log lines reach ``conveyor.librdkafka`` with mapped levels, repeated lines are
held back and counted, and a lost connection is told once instead of per reconnect."""

from __future__ import annotations

import logging
import time
from typing import Any

import confluent_kafka
import pytest

from conveyor.driver.clients import LIBRDKAFKA_LOG, LibrdkafkaLog
from conveyor.driver.connection import ConnectionNews, ConnectionWatch
from conveyor.errors import KafkaError
from conveyor.instrumentation.background_log import BACKGROUND_LOG

REFUSED = "[thrd:127.0.0.1:9092/bootstrap]: 127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after {} ms in state CONNECT)"
GETPID = "[thrd:main]: Failed to acquire idempotence PID from broker 127.0.0.1:9092/1: Coordinator load in progress: retrying"


def records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, str]]:
    assert BACKGROUND_LOG.flush(5)
    return [
        (r.name, r.levelno, r.getMessage())
        for r in caplog.records
        # This module's loggers, and the real client's configuration warning: a client another
        # test left behind may log its failed connects meanwhile (no broker for unit tests).
        if r.name.startswith("conveyor.librdkafka.test-") or "CONFWARN" in r.getMessage()
    ]


def test_a_real_client_logs_through_conveyor_librdkafka(caplog: pytest.LogCaptureFixture) -> None:
    """A librdkafka warning (a consumer setting given to a producer) arrives, at WARNING."""
    caplog.set_level(logging.DEBUG, "conveyor.librdkafka")
    producer = confluent_kafka.Producer({"session.timeout.ms": 6000, "logger": LIBRDKAFKA_LOG})
    producer.flush(0)
    [(name, level, text)] = [r for r in records(caplog) if "session.timeout.ms" in r[2]]
    assert (name, level) == ("conveyor.librdkafka", logging.WARNING)
    assert text.startswith("CONFWARN [")


def test_lost_connections_go_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "conveyor.librdkafka")
    log = LibrdkafkaLog(logging.getLogger("conveyor.librdkafka.test-a"))
    for attempt in range(50):
        log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", REFUSED.format(attempt))
    lines = records(caplog)
    assert len(lines) == 50
    assert {level for _, level, _ in lines} == {logging.DEBUG}


def test_a_retried_condition_is_info_until_it_persists(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "conveyor.librdkafka")
    log = LibrdkafkaLog(logging.getLogger("conveyor.librdkafka.test-b"), interval=0.0, persist=0.2)
    log.log(logging.WARNING, "%s [%s] %s", "GETPID", "rdkafka#producer-1", GETPID)
    time.sleep(0.25)  # let the condition persist past the threshold
    log.log(logging.WARNING, "%s [%s] %s", "GETPID", "rdkafka#producer-1", GETPID)
    assert [level for _, level, _ in records(caplog)] == [logging.INFO, logging.WARNING]


def test_repeated_lines_are_held_back_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "conveyor.librdkafka")
    log = LibrdkafkaLog(logging.getLogger("conveyor.librdkafka.test-c"), interval=0.2)
    for partition in range(30):
        log.log(
            logging.WARNING,
            "%s [%s] %s",
            "PARTCNT",
            "c",
            f"Topic t partition count changed to {partition}",
        )
    time.sleep(0.25)
    log.log(logging.WARNING, "%s [%s] %s", "PARTCNT", "c", "Topic t partition count changed to 99")
    lines = records(caplog)
    assert len(lines) == 2
    assert lines[1][2].endswith("(29 more like it)")
    assert {level for _, level, _ in lines} == {logging.WARNING}


def test_the_connection_watch_tells_loss_reminders_and_return() -> None:
    news: list[ConnectionNews] = []
    watch = ConnectionWatch("listener-a", news.append, reminder=0.2)
    refused = KafkaError("Connection refused", name="_TRANSPORT")
    assert watch.error(KafkaError("Broker: Unknown topic", name="UNKNOWN_TOPIC_OR_PART")) is False
    for _ in range(100):
        assert watch.error(refused)
    assert [(n.restored, n.reminder, n.errors) for n in news] == [(False, False, 1)]
    time.sleep(0.25)
    watch.error(KafkaError("1/1 brokers are down", name="_ALL_BROKERS_DOWN"))
    assert [(n.restored, n.reminder, n.errors) for n in news][1] == (False, True, 101)
    watch.alive()
    watch.alive()
    assert [(n.restored, n.reminder) for n in news] == [
        (False, False),
        (False, True),
        (True, False),
    ]
    assert news[-1].down_for >= 0.25
    assert watch.down_since is None


def test_probes_are_due_only_while_down(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = ConnectionWatch("producer", lambda news: None)
    assert not watch.probe_due()
    watch.error(KafkaError("refused", name="_TRANSPORT"))
    clock: dict[str, Any] = {"now": time.monotonic() + 6}
    monkeypatch.setattr("conveyor.driver.connection.time.monotonic", lambda: clock["now"])
    assert watch.probe_due()
    assert not watch.probe_due(), "not again until the next interval"
