"""Models decode and validate payloads and keys by their own library, say what is wrong field
by field, encode as they are produced, and are declared on consumers as ``Consumer[Model]``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from typing import Any, Generic, TypedDict, TypeVar

import msgspec
import orjson
import pydantic
import pytest

from conveyor import Consumer, Deserializers, MessageValidationError
from conveyor.errors import ConfigurationError, DeserializationError
from conveyor.messages import Message, Messages
from conveyor.models import decoder, encode_instance, json_schema, key_decoder
from conveyor.processing.model_check import check_models
from conveyor.routing.routes import Routes
from conveyor.serialization import json_dumps


class Line(pydantic.BaseModel):
    sku: str
    quantity: int


class PydanticOrder(pydantic.BaseModel):
    id: int
    lines: list[Line]


class StructOrder(msgspec.Struct):
    id: int
    total: float


@dataclasses.dataclass
class DataOrder:
    id: int
    note: str = ""


class DictOrder(TypedDict):
    id: int
    note: str


class _Raw:
    """librdkafka's message, as far as decoding looks at it."""

    def __init__(self, value: bytes | None, key: bytes | None = None, offset: int = 0) -> None:
        self._value, self._key, self._offset = value, key, offset

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def headers(self) -> None:
        return None


@pytest.mark.parametrize(
    ("model", "raw", "expected"),
    [
        (PydanticOrder, b'{"id":1,"lines":[{"sku":"a","quantity":2}]}',
         PydanticOrder(id=1, lines=[Line(sku="a", quantity=2)])),
        (StructOrder, b'{"id":1,"total":9.5}', StructOrder(id=1, total=9.5)),
        (DataOrder, b'{"id":1}', DataOrder(id=1)),
        (DictOrder, b'{"id":1,"note":"x"}', {"id": 1, "note": "x"}),
    ],
)  # fmt: skip
def test_each_kind_of_model_decodes_its_payload(model: Any, raw: bytes, expected: Any) -> None:
    assert decoder(model)(raw) == expected


@pytest.mark.parametrize(
    ("model", "raw", "path", "words"),
    [
        (PydanticOrder, b'{"id":1,"lines":[{"sku":"a","quantity":"many"}]}',
         "$.lines[0].quantity", "valid integer"),
        (StructOrder, b'{"id":"one","total":1}', "$.id", "Expected `int`, got `str`"),
        (DataOrder, b'{"note":"x"}', "$", "missing required field `id`"),
        (PydanticOrder, b"{not json", "$", "JSON"),
        (StructOrder, b"{not json", "$", "JSON"),
    ],
)  # fmt: skip
def test_an_invalid_payload_says_where_and_what(
    model: Any, raw: bytes, path: str, words: str
) -> None:
    message = Message(_Raw(raw, offset=12), Deserializers(payload_model=model))
    with pytest.raises(MessageValidationError) as raised:
        message.payload  # noqa: B018
    error = raised.value
    assert (error.part, error.topic, error.partition, error.offset) == ("payload", "orders", 0, 12)
    assert error.errors[0].path == path
    assert words in error.errors[0].message
    assert f"orders/0@12 is not a valid {model.__qualname__}" in str(error)


def test_a_decode_failure_without_a_model_stays_a_deserialization_error() -> None:
    with pytest.raises(DeserializationError) as raised:
        Message(_Raw(b"{not json"), Deserializers()).payload  # noqa: B018
    assert not isinstance(raised.value, MessageValidationError)


def test_key_models_read_text_ints_uuids_and_json() -> None:
    assert key_decoder(int)(b"42") == 42
    assert key_decoder(uuid.UUID)(b"00000000-0000-0000-0000-000000000001") == uuid.UUID(int=1)
    assert key_decoder(StructOrder)(b'{"id":1,"total":2}') == StructOrder(id=1, total=2)
    message = Message(_Raw(b"{}", key=b"forty-two"), Deserializers(key_model=int))
    with pytest.raises(MessageValidationError) as raised:
        message.key  # noqa: B018
    assert raised.value.part == "key"
    assert raised.value.errors[0].path == "$"


def test_models_are_produced_as_their_library_encodes_them() -> None:
    assert json.loads(json_dumps(PydanticOrder(id=1, lines=[]))) == {"id": 1, "lines": []}
    assert json.loads(json_dumps(StructOrder(id=1, total=2.5))) == {"id": 1, "total": 2.5}
    assert json.loads(json_dumps(DataOrder(id=3))) == {"id": 3, "note": ""}
    assert encode_instance({"id": 1}) is None  # a TypedDict is a dict: JSON as any


def test_not_a_model_is_refused_naming_the_part() -> None:
    with pytest.raises(ConfigurationError, match="float is not a model for a payload") as raised:
        decoder(float)
    assert raised.value.setting == "payload"


def test_a_consumer_declares_its_models_and_its_subclasses_keep_them() -> None:
    class Orders(Consumer[StructOrder]):
        def consume(self) -> None: ...

    class Keyed(Consumer[PydanticOrder, uuid.UUID]):
        def consume(self) -> None: ...

    class MoreOrders(Orders):
        pass

    class Untyped(Consumer):
        def consume(self) -> None: ...

    assert (Orders.payload_model, Orders.key_model) == (StructOrder, None)
    assert (Keyed.payload_model, Keyed.key_model) == (PydanticOrder, uuid.UUID)
    assert MoreOrders.payload_model is StructOrder
    assert (Untyped.payload_model, Untyped.key_model) == (None, None)


def test_a_route_decodes_with_its_consumers_models() -> None:
    class Orders(Consumer[StructOrder, int]):
        def consume(self) -> None: ...

    routes = Routes("app")
    deserializers = routes.topic("orders", Orders).deserializers
    assert deserializers.names()["payload"] == "StructOrder"
    assert deserializers.names()["key"] == "int"
    message = Message(_Raw(b'{"id":1,"total":2}', key=b"7"), deserializers)
    assert (message.payload, message.key) == (StructOrder(id=1, total=2), 7)


def test_a_model_and_a_deserializer_for_one_part_are_refused() -> None:
    class Orders(Consumer[StructOrder]):
        def consume(self) -> None: ...

    with pytest.raises(
        ConfigurationError, match="declares a payload model and the route a payload"
    ) as raised:
        Routes("app").topic("orders", Orders, deserializers={"payload": json.loads})
    assert raised.value.setting == "deserializers"


def test_a_batch_is_checked_up_to_its_first_invalid_message() -> None:
    deserializers = Deserializers(payload_model=StructOrder)
    batch = [
        _Raw(b'{"id":1,"total":1}', offset=0),
        _Raw(None, offset=1),  # a tombstone is no payload to check
        _Raw(b'{"id":"x","total":1}', offset=2),
        _Raw(b'{"id":3,"total":1}', offset=3),
    ]
    checked = check_models(batch, deserializers)
    assert checked.valid == 2
    assert checked.payloads == [StructOrder(id=1, total=1), None]
    assert isinstance(checked.error, MessageValidationError)
    assert checked.error.offset == 2
    every = check_models([batch[0], batch[3]], deserializers)
    assert (every.valid, every.error) == (2, None)
    assert every.payloads == [StructOrder(id=1, total=1), StructOrder(id=3, total=1)]
    messages: Messages[StructOrder] = Messages(
        [batch[0]], deserializers, "orders", 0, payloads=every.payloads[:1]
    )
    assert next(iter(messages)).payload is every.payloads[0]  # decoded once


def test_a_batch_with_an_invalid_key_stops_there() -> None:
    checked = check_models(
        [_Raw(b"{}", key=b"1"), _Raw(b"{}", key=b"one")], Deserializers(key_model=int)
    )
    assert checked.valid == 1
    assert checked.payloads is None
    assert isinstance(checked.error, MessageValidationError)
    assert checked.error.part == "key"


def test_json_schemas_come_from_the_model_library() -> None:
    assert json_schema(PydanticOrder)["properties"]["id"]["type"] == "integer"
    assert "StructOrder" in json.dumps(json_schema(StructOrder))
    assert json_schema(uuid.UUID) == {"type": "string", "format": "uuid"}


K = TypeVar("K")


def test_models_are_read_through_generic_subclasses_and_a_class_body_wins() -> None:
    class Base(Consumer[StructOrder, K], Generic[K]):
        pass

    class Keyed(Base[int]):
        def consume(self) -> None: ...

    class Chosen(Consumer[StructOrder]):
        payload_model = DataOrder

        def consume(self) -> None: ...

    assert (Keyed.payload_model, Keyed.key_model) == (StructOrder, int)
    assert Chosen.payload_model is DataOrder


def test_a_pydantic_dataclass_keeps_its_validators() -> None:
    @pydantic.dataclasses.dataclass
    class Priced:
        price: float

        @pydantic.field_validator("price")
        @classmethod
        def positive(cls, value: float) -> float:
            if value <= 0:
                raise ValueError("a price is positive")
            return value

    assert decoder(Priced)(b'{"price": 2}') == Priced(price=2)
    message = Message(_Raw(b'{"price": -5}'), Deserializers(payload_model=Priced))
    with pytest.raises(MessageValidationError, match="a price is positive"):
        message.payload  # noqa: B018


def test_a_routes_payload_model_stays_beside_a_consumers_key_model() -> None:
    class Keyed(Consumer[Any, int]):
        def consume(self) -> None: ...

    route = Routes("app").topic(
        "orders", Keyed, deserializers=Deserializers(payload_model=StructOrder)
    )
    assert route.deserializers.payload_model is StructOrder
    assert route.deserializers.key_model is int


def test_dataclasses_are_written_as_before_and_models_by_their_library() -> None:
    @dataclasses.dataclass
    class Stamped:
        at: dt.datetime

    value = Stamped(at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    assert json_dumps(value) == orjson.dumps(value), "orjson writes dataclasses, as it did"
    assert json_dumps({"inner": PydanticOrder(id=1, lines=[])}) == b'{"inner":{"id":1,"lines":[]}}'
