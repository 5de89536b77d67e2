"""The shop app: orders become payments, large payments get emails, sales are reported.

``OrdersConsumer`` turns each order into a payment on ``shop-payments`` (keyed like the
order, so a customer's payments stay in order); an order that does not fit the ``Order``
model goes to the dead letter queue ``shop-orders-dlq``, with what was wrong.
``PaymentsConsumer`` totals the payments and, for a large one, enqueues two background jobs:
a receipt now and a request for a review a day later. A recurring task reports the sales
every minute.

    export KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092     # what `conveyor broker start` prints
    cd examples && conveyor server --app shop.app:app
"""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar, TypedDict

from conveyor import App, Consumer

ORDERS = "shop-orders"
ORDERS_DLQ = "shop-orders-dlq"
PAYMENTS = "shop-payments"
PRICE = 9.5  # one widget
LARGE_PAYMENT = 500.0  # a payment of this much or more gets a receipt and a review request
REVIEW_DELAY = 24 * 3600.0  # seconds after a large payment

log = logging.getLogger(__name__)

# The brokers, credentials, concurrency and instance id come from the environment
# (KAFKA_BOOTSTRAP_SERVERS, CONVEYOR_KAFKA_*, CONVEYOR_CONCURRENCY, CONVEYOR_INSTANCE_ID ...);
# the code gives only what belongs to the app itself.
app = App(client_id="shop", max_messages=500, max_wait_time=0.5)


# The messages' models: TypedDicts, so payloads stay plain dicts (payload["amount"]), checked
# before consume() sees them and shown as schemas by `conveyor asyncapi` and the web UI.
class Order(TypedDict):
    run: str  # the quickstart run that produced it
    order: int
    quantity: int


class Payment(TypedDict):
    run: str
    order: int
    amount: float


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

    def totals(self) -> tuple[int, float]:
        """Payments and their amount, every run together."""
        with self.changed:
            return sum(self.payments.values()), sum(self.amounts.values())


ledger = Ledger()


class OrdersConsumer(Consumer[Order]):
    """Charges each order: one payment per order, produced before the order is marked."""

    produces: ClassVar[dict[str, Any]] = {PAYMENTS: Payment}  # for conveyor asyncapi

    def consume(self) -> None:
        payments = [
            {
                "topic": PAYMENTS,
                "key": message.key,
                "payload": Payment(
                    run=message.payload["run"],
                    order=message.payload["order"],
                    amount=round(message.payload["quantity"] * PRICE, 2),
                ),
            }
            for message in self.messages
        ]
        self.produce_many_sync(payments)


class PaymentsConsumer(Consumer[Payment]):
    """Totals the payments of each run; emails the customer of a large one (in the background)."""

    def consume(self) -> None:
        totals: dict[str, tuple[int, float]] = {}
        for message in self.messages:
            payment = message.payload
            count, amount = totals.get(payment["run"], (0, 0.0))
            totals[payment["run"]] = (count + 1, amount + payment["amount"])
            if payment["amount"] >= LARGE_PAYMENT:
                send_receipt.enqueue(payment["order"], payment["amount"], key=message.key)
                ask_for_review.enqueue_in(REVIEW_DELAY, payment["order"], key=message.key)
        for run, (count, amount) in totals.items():
            ledger.record(run, count, amount)


# An order that does not fit Order (a quantity that is not a whole number, say) goes to the
# dead letter queue at once; `conveyor dlq replay --topic shop-orders-dlq` sends it back.
app.routes.topic(ORDERS, OrdersConsumer, partitions=3, dead_letter_queue={"topic": ORDERS_DLQ})
app.routes.topic(ORDERS_DLQ, None, active=False, partitions=1)  # declared, not consumed
app.routes.topic(PAYMENTS, PaymentsConsumer, partitions=3)


# Background jobs: queue "mail" is the topic jobs-mail (and jobs-mail-dead for the jobs that
# still fail after 3 retries), read by this app; `conveyor topics migrate` creates them.
@app.job(queue="mail")
def send_receipt(order: int, amount: float) -> None:
    log.info("receipt for order %d: %.2f charged", order, amount)  # an email, in a real shop


@app.job(queue="mail")
def ask_for_review(order: int) -> None:
    log.info("review request for order %d", order)


def report_sales() -> None:
    """A recurring task: one process of the app's group runs it on each slot."""
    payments, amount = ledger.totals()
    log.info("sales so far: %d payments, %.2f", payments, amount)


app.recurring("* * * * *", report_sales, name="sales-report")  # every minute (UTC cron)

# Report to the web UI (`conveyor web --app shop.app:app`) every 5 s while the app runs.
app.web.enable()
