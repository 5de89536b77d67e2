"""Typed routes against a real broker: payloads arrive as validated model instances in
order; one that does not fit goes to the dead letter queue at once with its field errors
while the others are processed in order; models round-trip produce -> consume -> pipe."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from typing import Any

import msgspec
import pydantic
import pytest

from conveyor import App, Consumer, MessageValidationError, Producer, RemoteError, Verdict
from conveyor.rpc import Client, Handlers
from helpers import Record, running


class Order(msgspec.Struct):
    id: int
    total: float


class Invoice(pydantic.BaseModel):
    order: int
    amount: float


@dataclasses.dataclass
class Key:
    region: str


def make_app(bootstrap: str, name: str) -> App:
    return App(
        client_id=name,
        kafka={"bootstrap.servers": bootstrap, "group.id": f"{name}-{uuid.uuid4().hex[:8]}"},
        max_wait_time=0.2,
        pause_timeout=0.05,
        pause_max_timeout=0.2,
    )


def _orders(topic: str, bad: set[int], count: int = 10) -> list[dict[str, Any]]:
    return [
        {"topic": topic, "partition": 0,
         "payload": {"id": "not a number" if n in bad else n, "total": n * 1.5}}
        for n in range(count)
    ]  # fmt: skip


class DropsFreeOrders:
    """A filter that reads the typed payloads (the check comes first: it never sees the
    invalid one)."""

    def apply(self, messages: list[Any], now: float) -> Verdict:
        return Verdict([m for m in messages if m.payload.total > 0])


@pytest.mark.parametrize(
    ("lanes", "filtered"),
    [(False, False), (True, False), (False, True)],
    ids=["partition", "virtual-partitions", "filtered"],
)
def test_an_invalid_payload_goes_to_the_dlq_with_its_errors_and_the_others_in_order(
    kafka_bootstrap: str, new_topic, read_messages, lanes: bool, filtered: bool
) -> None:
    topic, dlq = new_topic(), new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(_orders(topic, bad={4}))
    record = Record()
    types: set[type] = set()

    class Orders(Consumer[Order]):
        def consume(self) -> None:
            for message in self.messages:
                types.add(type(message.payload))
                record.add(message.payload.id)

    app = make_app(kafka_bootstrap, "typed-dlq")
    options: dict[str, Any] = {"dead_letter_queue": {"topic": dlq, "max_retries": 5}}
    if lanes:  # one key per message's parity: two lanes, each in order
        options["virtual_partitions"] = {
            "partitioner": lambda message: message.offset % 2,
            "max_partitions": 2,
            "reducer": lambda key: key,
        }
    if filtered:
        options["filters"] = [DropsFreeOrders()]  # order 0 costs nothing: dropped
    app.routes.topic(topic, Orders, **options)
    failures: list[Any] = []
    app.monitor.subscribe("error.occurred", lambda event: failures.append(event["error"]))
    with running(app):
        assert record.wait_for(lambda items: len(items) >= (8 if filtered else 9))
        [moved] = read_messages(dlq, 1)
    assert types == {Order}
    if filtered:
        assert record.items == [1, 2, 3, 5, 6, 7, 8, 9], "the filter saw valid payloads only"
    elif lanes:
        assert sorted(record.items) == [0, 1, 2, 3, 5, 6, 7, 8, 9]
        for parity in (0, 1):
            ids = [n for n in record.items if n % 2 == parity]
            assert ids == sorted(ids), "each lane in order"
    else:
        assert record.items == [0, 1, 2, 3, 5, 6, 7, 8, 9], "every other one, once, in order"
    assert len(failures) == 1, "dispatched at once: no retries of an invalid payload"
    assert isinstance(failures[0], MessageValidationError)
    assert failures[0].offset == 4
    assert failures[0].errors[0].path == "$.id"
    headers = dict(moved.headers())
    assert headers["original_offset"] == b"4"
    assert headers["original_error_class"] == b"MessageValidationError"
    [error] = json.loads(headers["original_validation_errors"])
    assert error["path"] == "$.id"
    assert "Expected `int`, got `str`" in error["message"]
    assert json.loads(moved.value()) == {"id": "not a number", "total": 6.0}


def test_without_a_dlq_an_invalid_payload_is_retried_as_any_failure(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(_orders(topic, bad={2}, count=4))
    record = Record()
    failures = Record()

    class Orders(Consumer[Order]):
        def consume(self) -> None:
            for message in self.messages:
                record.add(message.payload.id)

    app = make_app(kafka_bootstrap, "typed-retry")
    app.routes.topic(topic, Orders)
    app.monitor.subscribe(
        "error.occurred", lambda event: failures.add((event["action"], event["error"].offset))
    )
    with running(app):
        assert failures.wait_for(lambda items: len(items) >= 3)
    assert record.items == [0, 1], "the messages before it processed, nothing after it"
    assert set(failures.items) == {("retry", 2)}, "it is retried, never skipped"


def test_models_round_trip_produce_consume_pipe(kafka_bootstrap: str, new_topic) -> None:
    orders, invoices, audit = new_topic(), new_topic(), new_topic()
    record = Record()

    class Billing(Consumer[Order, Key]):
        def consume(self) -> None:
            for message in self.messages:
                assert isinstance(message.key, Key)
                self.produce_sync(
                    topic=invoices,
                    key=message.key,
                    payload=Invoice(order=message.payload.id, amount=message.payload.total),
                )
                self.pipe_sync(topic=audit, message=message)

    class Invoices(Consumer[Invoice, Key]):
        def consume(self) -> None:
            for message in self.messages:
                record.add(("invoice", message.key.region, message.payload))

    class Audit(Consumer[Order, Key]):
        def consume(self) -> None:
            for message in self.messages:
                record.add(("audit", message.key.region, message.payload))

    app = make_app(kafka_bootstrap, "typed-trip")
    app.routes.topic(orders, Billing)
    app.routes.topic(invoices, Invoices)
    app.routes.topic(audit, Audit)
    with running(app):
        app.producer.produce_many_sync(
            [
                {"topic": orders, "key": Key(region=f"r{n}"), "payload": Order(id=n, total=n / 2)}
                for n in range(3)
            ]
        )
        assert record.wait_for(lambda items: len(items) >= 6)
    assert sorted(item[1:] for item in record.items if item[0] == "invoice") == [
        (f"r{n}", Invoice(order=n, amount=n / 2)) for n in range(3)
    ]
    assert sorted(
        (item[1:] for item in record.items if item[0] == "audit"), key=lambda item: item[0]
    ) == [(f"r{n}", Order(id=n, total=n / 2)) for n in range(3)]


class Quote(pydantic.BaseModel):
    order: int
    price: float


def test_an_rpc_call_with_model_arguments_and_result(kafka_bootstrap: str, new_topic) -> None:
    commands, results = new_topic(), new_topic()
    handlers = Handlers()
    seen: list[Any] = []

    @handlers.register("quote")
    def quote(order: Order, discount: float = 0.0) -> Quote:
        seen.append(order)
        return Quote(order=order.id, price=order.total * (1 - discount))

    @handlers.register("broken")
    def broken(order: Order) -> dict[str, Any]:
        return {"order": order.id}  # no price: not a Quote

    app = make_app(kafka_bootstrap, "typed-rpc")
    app.routes.rpc(commands, handlers, results_topic=results)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    config = {"bootstrap.servers": kafka_bootstrap}
    with running(app), Client(config, commands_topic=commands, results_topic=results) as client:
        assert assigned.wait(30)
        result = client.call("quote", Order(id=7, total=10.0), discount=0.5, returns=Quote)
        assert result == Quote(order=7, price=5.0)
        assert client.call("quote", {"id": 8, "total": 2.0}) == {"order": 8, "price": 2.0}
        with pytest.raises(
            RemoteError, match=r"order is not a valid Order: \$\.id: Expected `int`"
        ):
            client.call("quote", {"id": "eight", "total": 2.0})
        with pytest.raises(MessageValidationError, match=r"not a valid Quote: \$\.price") as bad:
            client.call("broken", Order(id=9, total=1.0), returns=Quote)
        assert bad.value.part == "result"
    assert seen == [Order(id=7, total=10.0), Order(id=8, total=2.0)], "validated into Orders"


def test_rpc_arguments_with_models_inside_optionals_and_lists_arrive_as_instances(
    kafka_bootstrap: str, new_topic
) -> None:
    """``Order | None`` and ``list[Order]`` parameters (what the AsyncAPI document shows as
    the model) are validated into Orders, as an ``Order`` one is; not left as dicts."""
    commands, results = new_topic(), new_topic()
    handlers = Handlers()
    seen: list[tuple[Any, list[Any]]] = []

    @handlers.register("gather")
    def gather(order: Order | None, orders: list[Order]) -> list[Order]:
        seen.append((order, orders))
        return [order, *orders] if order is not None else orders

    app = make_app(kafka_bootstrap, "typed-rpc-containers")
    app.routes.rpc(commands, handlers, results_topic=results)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    config = {"bootstrap.servers": kafka_bootstrap}
    with running(app), Client(config, commands_topic=commands, results_topic=results) as client:
        assert assigned.wait(30)
        both = [Order(id=1, total=1.0), {"id": 2, "total": 2.0}]
        result = client.call("gather", None, both, returns=list[Order])
        assert result == [Order(id=1, total=1.0), Order(id=2, total=2.0)]
        assert client.call("gather", {"id": 3, "total": 3.0}, orders=[]) == [
            {"id": 3, "total": 3.0}
        ]
        with pytest.raises(
            RemoteError, match=r"orders is not a valid list\[Order\]: \$\[1\]\.id: Expected `int`"
        ):
            client.call("gather", None, [{"id": 4, "total": 1.0}, {"id": "five", "total": 1.0}])
        with pytest.raises(
            RemoteError, match=r"order is not a valid Order \| None: \$: Object missing .*`total`"
        ):
            client.call("gather", {"id": 6}, [])
    assert seen == [
        (None, [Order(id=1, total=1.0), Order(id=2, total=2.0)]),
        (Order(id=3, total=3.0), []),
    ], "validated into Orders; the bad calls never ran the handler"
    assert [type(order) for order in seen[0][1]] == [Order, Order]
