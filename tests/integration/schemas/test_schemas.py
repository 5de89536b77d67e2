"""Schemas through a real Schema Registry compatible server (Apicurio Registry) and the real
broker: Avro, JSON Schema and Protobuf payloads produced through the producer's middleware
and consumed through a route's deserializers, the subject registered under the topic; a
value that breaks its schema is refused before it is sent; a payload that is not in the
registry's wire format goes to the dead letter queue."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any, ClassVar

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from conveyor import App, Consumer, Producer
from conveyor.schemas import Avro, JsonSchema, Protobuf, SchemaRegistry
from helpers import running

pytestmark = pytest.mark.xdist_group("schemas")  # xdist: see tests/conftest.py

ORDER_AVRO = json.dumps({
    "type": "record", "name": "Order",
    "fields": [{"name": "id", "type": "int"}, {"name": "sku", "type": "string"},
               {"name": "total", "type": "double"}],
})  # fmt: skip
ORDER_JSON = json.dumps({
    "type": "object", "properties": {"id": {"type": "integer"}, "sku": {"type": "string"}},
    "required": ["id", "sku"], "additionalProperties": False,
})  # fmt: skip


class Received(Consumer):
    got: ClassVar[list[Any]] = []
    changed: ClassVar[threading.Condition] = threading.Condition()

    def consume(self) -> None:
        with self.changed:
            self.got.extend(message.payload for message in self.messages)
            self.changed.notify_all()


def round_trip(
    bootstrap: str, topic: str, payloads: list[Any], fmt: Any, **route: Any
) -> list[Any]:
    Received.got = []
    app = App(client_id="schemas", kafka={"bootstrap.servers": bootstrap,
                                          "group.id": f"g-{uuid.uuid4().hex[:8]}"},
              max_wait_time=0.2)  # fmt: skip
    app.routes.topic(topic, Received, deserializers=fmt.deserializers(topic), **route)
    with running(app):
        with Producer(
            {"bootstrap.servers": bootstrap}, middleware=[fmt.serializing(topic)]
        ) as producer:
            for payload in payloads:
                producer.produce_sync(topic=topic, payload=payload)
        with Received.changed:
            assert Received.changed.wait_for(lambda: len(Received.got) >= len(payloads), 30)
    return list(Received.got)


def test_avro_round_trip_through_the_registry(
    kafka_bootstrap: str, new_topic, registry_url: str
) -> None:
    topic = new_topic()
    with SchemaRegistry(registry_url) as registry:
        orders = Avro(registry, schema=ORDER_AVRO)
        sent = [{"id": n, "sku": f"A-{n}", "total": n * 1.5} for n in range(5)]
        assert round_trip(kafka_bootstrap, topic, sent, orders) == sent
        assert f"{topic}-value" in registry.subjects()


def test_json_schema_round_trip_and_a_value_that_breaks_it_is_refused(
    kafka_bootstrap: str, new_topic, registry_url: str
) -> None:
    topic = new_topic()
    registry = SchemaRegistry(registry_url)
    orders = JsonSchema(registry, schema=ORDER_JSON)
    sent = [{"id": 1, "sku": "A-1"}, {"id": 2, "sku": "B-2"}]
    assert round_trip(kafka_bootstrap, topic, sent, orders) == sent
    with (
        Producer(
            {"bootstrap.servers": kafka_bootstrap}, middleware=[orders.serializing(topic)]
        ) as producer,
        pytest.raises(Exception, match=r"is not of type 'integer'|validat"),
    ):
        producer.produce_sync(topic=topic, payload={"id": "one", "sku": "A-1"})
    registry.close()


def order_class() -> type:
    """A Protobuf message class built at run time (no protoc): Order {int32 id; string sku}."""
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"order_{uuid.uuid4().hex}.proto", package="shop"
    )
    message = proto.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    message.field.add(name="sku", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_round_trip(kafka_bootstrap: str, new_topic, registry_url: str) -> None:
    topic = new_topic()
    order = order_class()
    with SchemaRegistry(registry_url) as registry:
        sent = [order(id=n, sku=f"P-{n}") for n in range(3)]
        got = round_trip(kafka_bootstrap, topic, sent, Protobuf(registry, order))
    assert [(m.id, m.sku) for m in got] == [(n, f"P-{n}") for n in range(3)]


def test_a_payload_not_in_the_wire_format_goes_to_the_dead_letter_queue(
    kafka_bootstrap: str, new_topic, registry_url: str, read_messages
) -> None:
    topic, dlq = new_topic(), new_topic()
    registry = SchemaRegistry(registry_url)
    orders = Avro(registry, schema=ORDER_AVRO)
    Received.got = []
    app = App(client_id="schemas", kafka={"bootstrap.servers": kafka_bootstrap,
                                          "group.id": f"g-{uuid.uuid4().hex[:8]}"},
              max_wait_time=0.2, pause_timeout=0.1)  # fmt: skip
    app.routes.topic(topic, Received, deserializers=orders.deserializers(topic),
                     dead_letter_queue={"topic": dlq, "max_retries": 0})  # fmt: skip
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(topic=topic, payload=b'{"id": 1}')  # plain JSON, no schema id
        producer.produce_sync(
            topic=topic, payload=orders.serialize(topic, {"id": 2, "sku": "ok", "total": 1.0})
        )
        with Received.changed:
            assert Received.changed.wait_for(lambda: len(Received.got) >= 1, 30)
        [dead] = read_messages(dlq, 1)
    registry.close()
    assert dead.value() == b'{"id": 1}'
    assert dict(dead.headers())["original_error_class"] == b"DeserializationError"
    assert Received.got == [{"id": 2, "sku": "ok", "total": 1.0}]
