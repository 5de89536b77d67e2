"""conveyor.testing on a typed route: a payload that does not fit the model takes the route's
failure policy as in the app (the dead letter queue at once, a skip, a strategy's word, or a
retry without a dead letter queue), after the messages before it were consumed."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import msgspec
import pytest

from conveyor import App, Consumer, MessageValidationError, testing


class Order(msgspec.Struct):
    id: int
    total: float


class Orders(Consumer[Order]):
    """Keeps the batches it saw (offsets, and the orders' ids)."""

    batches: ClassVar[list[list[tuple[int, int]]]] = []

    def consume(self) -> None:
        Orders.batches.append([(m.offset, m.payload.id) for m in self.messages])


class AsyncOrders(Consumer[Order]):
    async def consume(self) -> None:
        Orders.batches.append([(m.offset, m.payload.id) for m in self.messages])


def new_consumer(consumer_class: type[Consumer] = Orders, **route: Any) -> tuple[App, Consumer]:
    Orders.batches = []
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    app.routes.topic("orders", consumer_class, **route)
    return app, testing.consumer_for(app, "orders")


def feed(consumer: Consumer) -> None:
    """Orders 0, 1 (not an Order: its id is text) and 2, at offsets 0, 1, 2."""
    testing.produce(consumer, {"id": 0, "total": 1.0}, key="a")
    testing.produce(consumer, {"id": "one", "total": 2.0}, key="b")
    testing.produce(consumer, {"id": 2, "total": 3.0}, key="c")


@pytest.mark.parametrize("consumer_class", [Orders, AsyncOrders], ids=["sync", "async"])
def test_an_invalid_payload_goes_to_the_dlq_at_once_and_the_others_are_consumed_in_order(
    consumer_class: type[Consumer],
) -> None:
    app, consumer = new_consumer(consumer_class, dead_letter_queue={"topic": "orders-dlq"})
    feed(consumer)
    testing.consume(consumer)  # no exception: the app would not see one either
    assert Orders.batches == [[(0, 0)], [(2, 2)]], "the one before it first, then the rest"
    recorded = testing.recorded(consumer)
    [letter] = recorded.dead_letters
    assert (letter.topic, letter.message.offset) == ("orders-dlq", 1)
    assert isinstance(letter.error, MessageValidationError)
    assert [mark.offset for mark in recorded.marks] == [1, 2, 3]
    assert recorded.committed == 3
    [copy] = testing.produced(app, "orders-dlq")
    assert (copy.key, copy.payload) == ("b", {"id": "one", "total": 2.0})
    assert copy.headers["original_error_class"] == b"MessageValidationError"
    assert copy.headers["original_offset"] == b"1"
    [error] = json.loads(copy.headers["original_validation_errors"])
    assert error["path"] == "$.id"
    assert consumer.attempt == 1, "a dispatch starts the count again"


def test_dispatch_follows_the_route_s_methods_and_its_transaction() -> None:
    app, consumer = new_consumer(dead_letter_queue={"topic": "orders-dlq", "transactional": True})
    testing.produce(consumer, {"id": "zero", "total": 1.0})
    testing.consume(consumer)
    assert [m.payload["id"] for m in testing.produced(app, "orders-dlq")] == ["zero"]
    assert testing.capture(app).offsets == [("orders", 0, 1)], "committed with its offset"

    app, consumer = new_consumer(
        dead_letter_queue={
            "topic": "orders-dlq", "dispatch_method": "produce_sync",
            "marking_method": "mark_as_consumed_sync",
        }
    )  # fmt: skip
    testing.produce(consumer, {"id": "zero", "total": 1.0})
    testing.consume(consumer)
    assert testing.recorded(consumer).marks == [testing.Mark(1, sync=True)]


def test_a_dlq_without_a_topic_skips_it() -> None:
    app, consumer = new_consumer(dead_letter_queue={"topic": False})
    feed(consumer)
    testing.consume(consumer)
    assert Orders.batches == [[(0, 0)], [(2, 2)]]
    assert testing.recorded(consumer).dead_letters == []
    assert testing.recorded(consumer).committed == 3
    assert testing.produced(app) == []


def test_without_a_dlq_it_is_retried_as_a_failure_of_consume() -> None:
    app, consumer = new_consumer()
    feed(consumer)
    for attempt in (1, 2):
        with pytest.raises(MessageValidationError, match=r"\$\.id") as raised:
            testing.consume(consumer)
        assert raised.value.offset == 1
        assert consumer.attempt == attempt + 1
    assert Orders.batches == [[(0, 0)]], "the one before it was consumed, once"
    assert testing.recorded(consumer).committed == 1
    assert [m.offset for m in consumer.messages] == [1, 2], "the batch stays from it on"
    assert testing.produced(app) == []


def test_a_route_s_strategy_decides_with_the_attempt() -> None:
    asked: list[tuple[str, int]] = []

    def strategy(error: BaseException, attempt: int) -> str:
        asked.append((type(error).__name__, attempt))
        return "retry" if attempt < 2 else "dispatch"

    app, consumer = new_consumer(dead_letter_queue={"topic": "orders-dlq", "strategy": strategy})
    testing.produce(consumer, {"id": "zero", "total": 1.0})
    with pytest.raises(MessageValidationError):
        testing.consume(consumer)
    testing.consume(consumer)
    assert asked == [("MessageValidationError", 1), ("MessageValidationError", 2)]
    [letter] = testing.recorded(consumer).dead_letters
    assert letter.message.offset == 0
    assert len(testing.produced(app, "orders-dlq")) == 1


def test_an_invalid_key_is_handled_as_an_invalid_payload() -> None:
    class Keyed(Consumer[Order, int]):
        def consume(self) -> None:
            Orders.batches.append([(m.offset, m.key) for m in self.messages])

    _, consumer = new_consumer(Keyed, dead_letter_queue={"topic": "orders-dlq"})
    testing.produce(consumer, {"id": 0, "total": 1.0}, key="seven")
    testing.produce(consumer, {"id": 1, "total": 1.0}, key="8")
    testing.consume(consumer)
    assert Orders.batches == [[(1, 8)]]
    [letter] = testing.recorded(consumer).dead_letters
    assert isinstance(letter.error, MessageValidationError)
    assert letter.error.part == "key"
