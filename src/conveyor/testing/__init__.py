"""Testing helpers for your own consumers: no broker needed.

Build a route's consumer, feed it messages (raw bytes through the route's deserializers, as
Kafka would hand them over), run it, and check what it produced and what it asked of its
partition::

    from conveyor import testing
    from shop.app import app

    def test_an_order_becomes_a_payment() -> None:
        consumer = testing.consumer_for(app, "shop-orders")
        testing.produce(consumer, {"run": "r", "order": 1, "quantity": 2}, key="c-7")
        testing.consume(consumer)
        [payment] = testing.produced(app, "shop-payments")
        assert payment.key == "c-7" and payment.payload["amount"] == 19.0
        assert testing.recorded(consumer).committed == 1

From the first ``consumer_for`` (or :func:`capture`) on, the app's producers capture what
they are given instead of sending it. With pytest, the ``conveyor_app`` and
``conveyor_consumer`` fixtures (this package's plugin) do the same and clear what was
captured after each test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.records import Record
from conveyor.testing.capture import Captured, CapturingProducer, capture, produced
from conveyor.testing.clock import StreamClock, stream_clock
from conveyor.testing.partition import (
    DeadLetter,
    Mark,
    Pause,
    Recorded,
    consume,
    consumer_for,
    produce,
    put_table,
    recorded,
    revoke,
)

if TYPE_CHECKING:
    from conveyor.testing.host import AppUnderTest

__all__ = [
    "Captured",
    "CapturingProducer",
    "DeadLetter",
    "Mark",
    "Pause",
    "Record",
    "Recorded",
    "StreamClock",
    "capture",
    "clear",
    "consume",
    "consumer_for",
    "produce",
    "produced",
    "put_table",
    "recorded",
    "revoke",
    "stream_clock",
]


def clear(app: AppUnderTest) -> None:
    """Forget what ``app``'s producers captured (see :func:`capture`)."""
    if not callable(getattr(app, "make_producers_with", None)):
        raise TypeError(f"clear() takes a conveyor.App, not {type(app).__name__}")
    capture(app).clear()
