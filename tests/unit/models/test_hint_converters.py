"""Type hints with models inside (``Order | None``, ``list[Order]``, ``dict[str, Order]``,
``tuple[Order, ...]``): validated as a whole by the models' library, each kind of model."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, TypedDict

import msgspec
import pydantic
import pytest

from conveyor.errors import ConfigurationError
from conveyor.models import converter, field_errors, model_name, models_in


class StructOrder(msgspec.Struct):
    id: int


class PydanticOrder(pydantic.BaseModel):
    id: int


@dataclasses.dataclass
class DataOrder:
    id: int


class DictOrder(TypedDict):
    id: int


@pydantic.dataclasses.dataclass
class PydanticDataOrder:
    id: int


class StructRefund(msgspec.Struct):
    order: int


INVALID = (msgspec.ValidationError, pydantic.ValidationError)
MODELS = [StructOrder, PydanticOrder, DataOrder, DictOrder, PydanticDataOrder]


def _order(model: Any, id_: int) -> Any:
    return {"id": id_} if model is DictOrder else model(id=id_)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_containers_and_optionals_of_each_kind_of_model_are_validated_into_it(model: Any) -> None:
    one, two = _order(model, 1), _order(model, 2)
    assert converter(model | None)(None) is None
    assert converter(model | None)({"id": 1}) == one
    assert converter(Optional[model])({"id": 1}) == one  # noqa: UP045 - the old spelling too
    assert converter(list[model])([{"id": 1}, {"id": 2}]) == [one, two]
    assert converter(dict[str, model])({"a": {"id": 1}}) == {"a": one}
    assert converter(tuple[model, ...])([{"id": 1}, {"id": 2}]) == (one, two)
    assert converter(list[model] | None)(None) is None
    if model is not DictOrder:
        assert type(converter(list[model])([{"id": 1}])[0]) is model
        assert converter(list[model])([one]) == [one], "an instance passes as it is"


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_a_wrong_item_is_named_by_its_path(model: Any) -> None:
    with pytest.raises(INVALID) as raised:
        converter(list[model])([{"id": 1}, {"id": "two"}])
    [error] = field_errors(raised.value) or []
    assert error.path == "$[1].id"
    with pytest.raises(INVALID) as raised:
        converter(model | None)("an order")
    assert field_errors(raised.value), "a validation error, told field by field"


def test_what_a_hint_names_and_how_it_reads() -> None:
    assert models_in(dict[str, list[StructOrder | None]]) == [StructOrder]
    assert models_in(tuple[StructOrder, StructRefund, StructOrder]) == [StructOrder, StructRefund]
    assert models_in(list[int]) == []
    assert models_in(StructOrder) == [StructOrder]
    assert model_name(StructOrder | None) == "StructOrder | None"
    assert model_name(dict[str, tuple[StructOrder, ...]]) == "dict[str, tuple[StructOrder, ...]]"


def test_a_hint_its_library_cannot_validate_is_refused_when_the_converter_is_made() -> None:
    with pytest.raises(ConfigurationError, match="mixes pydantic models and msgspec Structs"):
        converter(StructOrder | PydanticOrder)
    with pytest.raises(ConfigurationError, match=r"StructOrder \| StructRefund cannot be valid"):
        converter(StructOrder | StructRefund)  # msgspec wants tagged Structs in a union
    with pytest.raises(ConfigurationError, match="is not a model"):
        converter(list[int])
