"""The example shop's consumers, tested as a user would test them: ``conveyor.testing``
builds each route's consumer, feeds it raw messages and captures what it produces."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from conveyor import App, Consumer, MessageValidationError, testing


def test_each_order_becomes_a_payment_keyed_like_the_order(
    conveyor_app: App, conveyor_consumer: Callable[..., Consumer]
) -> None:
    orders = conveyor_consumer("shop-orders", partition=1)
    testing.produce(orders, {"run": "r1", "order": 1, "quantity": 2}, key="customer-7")
    testing.produce(orders, {"run": "r1", "order": 2, "quantity": 1}, key="customer-8")
    testing.produce(orders, {"run": "r1", "order": 3, "quantity": 4}, key="customer-7")
    testing.consume(orders)

    payments = testing.produced(conveyor_app, "shop-payments")
    assert [(p.key, p.payload["order"], p.payload["amount"]) for p in payments] == [
        ("customer-7", 1, 19.0), ("customer-8", 2, 9.5), ("customer-7", 3, 38.0),
    ]  # fmt: skip
    # a customer's payments share a partition (of the three the route declares), in order
    sevens = [p for p in payments if p.key == "customer-7"]
    assert sevens[0].partition == sevens[1].partition
    assert sevens[0].offset < sevens[1].offset
    assert testing.recorded(orders).committed == 3, "the batch is marked after consume()"
    assert isinstance(conveyor_app.producer, testing.CapturingProducer), "nothing was sent"


def test_payments_are_totalled_per_run(conveyor_consumer: Callable[..., Consumer]) -> None:
    from shop.app import ledger  # noqa: PLC0415

    payments = conveyor_consumer("shop-payments")
    for amount in (19.0, 9.5):
        testing.produce(payments, {"run": "r-total", "order": 1, "amount": amount}, key="c")
    testing.consume(payments)
    assert ledger.payments["r-total"] == 2
    assert ledger.amounts["r-total"] == 28.5


def test_an_order_that_does_not_fit_the_model_goes_to_the_dlq_and_charges_nothing(
    conveyor_app: App, conveyor_consumer: Callable[..., Consumer]
) -> None:
    """As in the app: the batch is checked against the model before consume(), and such an
    order goes to the route's dead letter queue at once (quickstart's poison)."""
    orders = conveyor_consumer("shop-orders")
    testing.produce(orders, {"run": "r2", "order": 1, "quantity": "a dozen"}, key="c")
    testing.consume(orders)
    [letter] = testing.recorded(orders).dead_letters
    assert letter.topic == "shop-orders-dlq"
    assert isinstance(letter.error, MessageValidationError)
    assert [e.path for e in letter.error.errors] == ["$.quantity"]
    assert testing.recorded(orders).committed == 1, "marked past it"
    [copy] = testing.produced(conveyor_app, "shop-orders-dlq")
    assert copy.key == "c"
    assert copy.headers["original_error_class"] == b"MessageValidationError"
    assert testing.produced(conveyor_app, "shop-payments") == [], "nothing charged"


def test_a_large_payment_enqueues_a_receipt_now_and_a_review_request_a_day_later(
    conveyor_app: App, conveyor_consumer: Callable[..., Consumer]
) -> None:
    payments = conveyor_consumer("shop-payments")
    testing.produce(payments, {"run": "r4", "order": 7, "amount": 950.0}, key="c-7")
    testing.produce(payments, {"run": "r4", "order": 8, "amount": 9.5}, key="c-8")
    testing.consume(payments)

    [receipt] = testing.produced(conveyor_app, "jobs-mail")
    assert (receipt.key, receipt.payload["job"], receipt.payload["args"]) == (
        "c-7", "shop.app.send_receipt", [7, 950.0],
    )  # fmt: skip
    [review] = testing.produced(conveyor_app, "shop_schedules")  # a job enqueued_in
    assert review.headers["conveyor-schedule-topic"] == b"jobs-mail"
    due = int(review.headers["conveyor-schedule-at"]) / 1000
    assert abs(due - time.time() - 24 * 3600) < 60


def test_the_jobs_and_the_sales_report_run_as_plain_functions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from shop.app import ask_for_review, report_sales, send_receipt  # noqa: PLC0415

    with caplog.at_level(logging.INFO, logger="shop.app"):
        send_receipt(7, 950.0)  # calling a job runs it here and now
        ask_for_review(7)
        report_sales()
    assert [r.getMessage() for r in caplog.records][:2] == [
        "receipt for order 7: 950.00 charged", "review request for order 7",
    ]  # fmt: skip
    assert caplog.records[2].getMessage().startswith("sales so far: ")


def test_a_payment_goes_on_to_the_payments_consumer(
    conveyor_app: App, conveyor_consumer: Callable[..., Consumer]
) -> None:
    from shop.app import ledger  # noqa: PLC0415

    orders = conveyor_consumer("shop-orders")
    testing.produce(orders, {"run": "r3", "order": 9, "quantity": 1}, key="c-9")
    testing.consume(orders)
    [payment] = testing.produced(conveyor_app, "shop-payments")
    payments = conveyor_consumer("shop-payments", partition=payment.partition)
    testing.produce(payments, payment)  # the produced message itself, bytes as they were
    testing.consume(payments)
    assert ledger.payments["r3"] == 1
