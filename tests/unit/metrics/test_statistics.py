"""librdkafka statistics mapped to gauges, and metrics without their extra."""

from __future__ import annotations

import sys

import pytest

from conveyor import App, ConfigurationError
from conveyor.metrics import gauges_of

STATISTICS = {
    "name": "rdkafka#consumer-1",
    "msg_cnt": 3,
    "msg_size": 300,
    "brokers": {
        "127.0.0.1:9092/1": {
            "nodeid": 1,
            "nodename": "127.0.0.1:9092",
            "outbuf_msg_cnt": 2,
            "rtt": {"cnt": 4, "avg": 1500, "p99": 9000},
        },
        "GroupCoordinator": {"nodeid": -1, "rtt": {"cnt": 1, "avg": 5}},
        "127.0.0.1:9093/2": {"nodeid": 2, "nodename": "b2", "rtt": {"cnt": 0, "avg": 0}},
    },
    "topics": {
        "orders": {
            "partitions": {
                "0": {"fetchq_cnt": 12, "fetch_state": "active"},
                "1": {"fetchq_cnt": 0, "fetch_state": "none"},
                "-1": {"fetchq_cnt": 0, "fetch_state": "active"},
            }
        }
    },
}


def test_the_useful_numbers_become_gauges_in_seconds() -> None:
    gauges = {
        (name, tuple(labels.items())): value for name, labels, value in gauges_of("c", STATISTICS)
    }
    client = ("client", "rdkafka#consumer-1")
    assert gauges[("conveyor_librdkafka_queue_messages", (client,))] == 3
    assert gauges[("conveyor_librdkafka_queue_bytes", (client,))] == 300
    rtt = "conveyor_librdkafka_broker_rtt_seconds"
    assert gauges[(rtt, (client, ("broker", "127.0.0.1:9092"), ("stat", "avg")))] == 0.0015
    assert gauges[(rtt, (client, ("broker", "127.0.0.1:9092"), ("stat", "p99")))] == 0.009
    assert not any(key[0] == rtt and ("broker", "b2") in key[1] for key in gauges), (
        "no requests, no rtt"
    )
    fetchq = "conveyor_librdkafka_fetch_queue_messages"
    assert gauges[(fetchq, (client, ("topic", "orders"), ("partition", "0")))] == 12
    assert len([key for key in gauges if key[0] == fetchq]) == 1


def test_malformed_statistics_yield_nothing_rather_than_fail() -> None:
    assert list(gauges_of("c", {"brokers": {"x": "junk"}, "topics": {"t": None}})) == []


def test_metrics_without_the_extra_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ConfigurationError, match=r"conveyor\[prometheus\]"):
        app.metrics.enable()
    assert not app.metrics.enabled


def test_an_idle_app_exposes_its_metrics() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.metrics.enable()
    text = app.metrics.exposition().decode()
    assert "# TYPE messaging_client_sent_messages_total counter" in text
    assert "conveyor_consumer_lag_messages" in text
    with pytest.raises(ConfigurationError, match="twice"):
        app.metrics.enable()
