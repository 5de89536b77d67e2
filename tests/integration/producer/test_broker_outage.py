"""When the broker stops, produce_sync raises at its deadline instead of hanging."""

from __future__ import annotations

import time

import pytest

from conveyor import Admin, DeliveryError, Producer, WaitTimeoutError
from conveyor.broker import DevelopmentBroker


def test_a_stopped_broker_makes_produce_sync_raise_at_its_deadline(
    own_broker: DevelopmentBroker,
) -> None:
    status = own_broker.status()
    assert status is not None
    with Admin({"bootstrap.servers": status.bootstrap_servers}) as admin:
        admin.create_topic("outage", partitions=1)
    settings = {"bootstrap.servers": status.bootstrap_servers, "message.timeout.ms": 3000}
    with Producer(settings) as producer:
        assert producer.produce_sync(topic="outage", payload=b"before").offset == 0
        own_broker.stop()

        started = time.monotonic()
        with pytest.raises(WaitTimeoutError):
            producer.produce_sync(topic="outage", payload=b"during", timeout=1.0)
        assert 0.9 <= time.monotonic() - started < 3

        started = time.monotonic()
        with pytest.raises(DeliveryError) as raised:
            producer.produce_sync(topic="outage", payload=b"during")
        assert time.monotonic() - started < 10
        assert raised.value.name == "_MSG_TIMED_OUT"
        assert "message.timeout.ms" in str(raised.value)
        producer.close(timeout=1)
