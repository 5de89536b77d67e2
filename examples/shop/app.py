"""The shop app: two topics, two consumers.

``OrdersConsumer`` turns each order into a payment on ``shop-payments`` (keyed like the
order, so a customer's payments stay in order); ``PaymentsConsumer`` totals them.

    export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092     # what `conveyor broker start` prints
    cd examples && conveyor server --app shop.app:app
"""

from __future__ import annotations

import threading
from typing import ClassVar

from conveyor import App, Consumer

ORDERS = "shop-orders"
PAYMENTS = "shop-payments"

# The brokers, credentials, concurrency and instance id come from the environment
# (KAFKA_BOOTSTRAP_SERVERS, CONVEYOR_KAFKA_*, CONVEYOR_CONCURRENCY, CONVEYOR_INSTANCE_ID ...);
# the code gives only what belongs to the app itself.
app = App(client_id="shop", max_messages=500, max_wait_time=0.5)


class Ledger:
    """Payments seen, by run; the example runner waits on it (woken by each batch)."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.payments: dict[str, int] = {}
        self.amounts: dict[str, float] = {}

    def record(self, run: str, count: int, amount: float) -> None:
        with self.changed:
            self.payments[run] = self.payments.get(run, 0) + count
            self.amounts[run] = self.amounts.get(run, 0.0) + amount
            self.changed.notify_all()

    def wait_for(self, run: str, count: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.payments.get(run, 0) >= count, timeout)


ledger = Ledger()


class OrdersConsumer(Consumer):
    """Charges each order: one payment per order, produced before the order is marked."""

    produces: ClassVar[dict[str, None]] = {PAYMENTS: None}  # for conveyor asyncapi

    def consume(self) -> None:
        payments = [
            {
                "topic": PAYMENTS,
                "key": message.key,
                "payload": {
                    "run": message.payload["run"],
                    "order": message.payload["order"],
                    "amount": round(message.payload["quantity"] * 9.5, 2),
                },
            }
            for message in self.messages
        ]
        self.produce_many_sync(payments)


class PaymentsConsumer(Consumer):
    """Totals the payments of each run."""

    def consume(self) -> None:
        totals: dict[str, tuple[int, float]] = {}
        for payment in self.messages.payloads:
            count, amount = totals.get(payment["run"], (0, 0.0))
            totals[payment["run"]] = (count + 1, amount + payment["amount"])
        for run, (count, amount) in totals.items():
            ledger.record(run, count, amount)


app.routes.topic(ORDERS, OrdersConsumer, partitions=3)
app.routes.topic(PAYMENTS, PaymentsConsumer, partitions=3)

# Report to the web UI (`conveyor web --app shop.app:app`) every 5 s while the app runs.
app.web.enable()
