"""Stream-stream joins against the real broker: orders joined with payments by key within a
time window pair once each whichever came first, before or while the app runs; after a
restart the orders kept in the join's store (restored from its changelog) still pair with the
payments that come; a joined topic partitioned otherwise stops the app at start."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer, Producer
from conveyor.state import Join
from helpers import running

T = 1_700_000_000_000  # the messages' timestamps, milliseconds
SECOND = 1_000


def joined_app(
    kafka_bootstrap: str, orders: str, payments: str, group: str, folder: Path, pairs: list[Any]
) -> App:
    lock = threading.Lock()

    class Paid(Consumer):
        # a grace as long as the test: its messages come in any order of time, none late
        join = Join(payments, within=5, grace=600)

        def consume(self) -> None:
            self.record(self.join.update(self.messages))

        def tick(self) -> None:
            self.record(self.join.tick())  # the payments that came while no order did

        def record(self, joined: list[Any]) -> None:
            with lock:
                pairs.extend(
                    (j.key, j.left.payload["order"], j.right.payload["paid"]) for j in joined
                )

    app = App(
        client_id="joins",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
               "auto.offset.reset": "earliest"},
        max_wait_time=0.2, state_dir=str(folder),
    )  # fmt: skip
    app.routes.topic(orders, Paid)
    return app


def produce(producer: Producer, topic: str, keys: range, offset: int, field: str) -> None:
    """A message per key, ``offset`` ms after the key's own time (key ``k-i``: ``T + i s``)."""
    producer.produce_many_sync(
        [{"topic": topic, "key": f"k-{i}", "payload": {field: i},
          "timestamp": T + i * SECOND + offset} for i in keys]
    )  # fmt: skip


def wait_for(pairs: list[Any], count: int, what: str) -> None:
    deadline = time.monotonic() + 60
    while len(pairs) < count:
        assert time.monotonic() < deadline, f"{len(pairs)} of {count} {what}"
        threading.Event().wait(0.05)  # the app's workers fill pairs: nothing to wait on


def test_orders_pair_with_payments_once_each_whichever_came_first_and_after_a_restart(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    orders, payments = new_topic(partitions=2), new_topic(partitions=2)
    group = f"j-{uuid.uuid4().hex[:8]}"
    pairs: list[Any] = []
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        produce(producer, payments, range(0, 40), 0, "paid")  # before their orders
        produce(producer, orders, range(40, 80), 0, "order")  # before their payments
        produce(producer, payments, range(200, 210), 6 * SECOND, "paid")  # too far: no pair
        with running(joined_app(kafka_bootstrap, orders, payments, group, tmp_path, pairs)):
            produce(producer, orders, range(0, 40), 2 * SECOND, "order")
            produce(producer, payments, range(40, 80), -4 * SECOND, "paid")
            produce(producer, orders, range(200, 210), 0, "order")
            wait_for(pairs, 80, "pairs")
            produce(producer, orders, range(80, 120), 0, "order")  # their payments come later
            produce(producer, orders, range(300, 301), 0, "order")  # the marker's
            produce(producer, payments, range(300, 301), 0, "paid")
            wait_for(pairs, 81, "pairs with the marker's")
        first_run = sorted(pairs)
        assert first_run == sorted((f"k-{i}", i, i) for i in [*range(80), 300]), (
            "each pair once, and none 6 s apart"
        )
        pairs.clear()
        restarted = joined_app(kafka_bootstrap, orders, payments, group, tmp_path, pairs)
        with running(restarted):
            produce(producer, payments, range(80, 120), 1 * SECOND, "paid")
            wait_for(pairs, 40, "pairs after the restart")
            produce(producer, orders, range(301, 302), 0, "order")  # a marker again
            produce(producer, payments, range(301, 302), 0, "paid")
            wait_for(pairs, 41, "pairs with the marker's")
    assert sorted(pairs) == sorted((f"k-{i}", i, i) for i in [*range(80, 120), 301]), (
        "the orders kept before the restart paired with the payments after it, once each"
    )


def test_a_joined_topic_partitioned_otherwise_stops_the_app_at_start(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    orders, payments = new_topic(partitions=2), new_topic(partitions=3)
    app = joined_app(kafka_bootstrap, orders, payments, f"j-{uuid.uuid4().hex[:8]}", tmp_path, [])
    with pytest.raises(ConfigurationError, match=r"joins the stream .*co-partitioned"):
        app.start()
    app.stop_and_wait()
