"""The tracing example's consumers, tested with ``conveyor.testing``: an order is piped to
the shipments topic with where it came from, and a shipment is counted as shipped."""

from __future__ import annotations

import threading

from conveyor import testing
from conveyor.messages import Message
from tracing.app import ORDERS, SHIPMENTS, build  # the examples folder: see conftest.py


def test_an_order_is_piped_to_shipments_and_shipped() -> None:
    shipped = threading.Semaphore(0)
    app = build("127.0.0.1:1", shipped)  # never reached: the producers capture
    orders = testing.consumer_for(app, ORDERS)
    testing.produce(orders, {"id": 7}, key="o-7")
    testing.consume(orders)

    [piped] = testing.produced(app, SHIPMENTS)
    assert isinstance(piped, Message)
    assert (piped.key, piped.payload) == ("o-7", {"id": 7})
    assert piped.headers["source_topic"] == ORDERS.encode()
    assert piped.headers["source_offset"] == b"0"

    shipments = testing.consumer_for(app, SHIPMENTS, piped.partition)
    testing.produce(shipments, piped)
    testing.consume(shipments)
    assert shipped.acquire(timeout=0), "the shipment was counted"
    assert testing.recorded(shipments).committed == 1
