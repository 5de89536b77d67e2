"""A call's arguments (an RPC request's, a job's) checked against its function's signature and
type hints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Optional, TypedDict

import msgspec
import pydantic
import pytest

from conveyor.errors import ConfigurationError
from conveyor.models.arguments import ArgumentChecker, InvalidArguments


def handler(
    count: int,
    ratio: float,
    name: str,
    tags: list[str],
    scores: dict[str, float],
    mode: Literal["fast", "safe"] = "safe",
    note: str | None = None,
    *extra: int,
    anything: Any = None,
    untyped=None,
    pair: tuple[int, str] = (0, ""),
    items: Sequence[int] = (),
    table: Mapping[str, list[int]] | None = None,
) -> None:
    pass


GOOD = {"count": 1, "ratio": 2, "name": "x", "tags": ["a"], "scores": {"a": 1.5}}


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ([], GOOD),
        ([1, 0.5, "x", [], {}], {}),
        ([1, 0.5, "x", [], {}, "fast", None, 7, 8], {}),
        ([], {**GOOD, "anything": object(), "untyped": [1], "pair": [1, "a"], "items": [1, 2],
              "table": {"k": [1]}}),
    ],
)  # fmt: skip
def test_fitting_arguments_pass(args: list[Any], kwargs: dict[str, Any]) -> None:
    assert ArgumentChecker(handler).check(args, kwargs) == (args, kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({**GOOD, "count": "1"}, "count must be int, not str"),
        ({**GOOD, "count": True}, "count must be int, not bool"),
        ({**GOOD, "ratio": "0.5"}, "ratio must be float"),
        ({**GOOD, "tags": ["a", 2]}, "tags must be list[str]"),
        ({**GOOD, "scores": {"a": "high"}}, "scores must be dict[str, float]"),
        ({**GOOD, "mode": "reckless"}, "mode must be Literal"),
        ({**GOOD, "note": 5}, "note must be"),
        ({**GOOD, "pair": [1, 2]}, "pair must be tuple[int, str]"),
        ({**GOOD, "colour": "red"}, "unexpected keyword argument 'colour'"),
        ({"count": 1}, "missing a required argument: 'ratio'"),
    ],
)
def test_arguments_that_do_not_fit_name_the_parameter(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArguments, match=message.replace("[", r"\[").replace("]", r"\]")):
        ArgumentChecker(handler).check([], kwargs)


def test_extra_positional_arguments_are_checked_too() -> None:
    with pytest.raises(InvalidArguments, match="extra must be int"):
        ArgumentChecker(handler).check([1, 0.5, "x", [], {}, "fast", None, 7, "eight"], {})
    with pytest.raises(InvalidArguments, match="args must be a list"):
        ArgumentChecker(handler).check("1", {})


class Point(TypedDict):
    x: int


def converting(when: datetime, where: Point, count: int = None) -> None:  # type: ignore[assignment]  # noqa: RUF013
    pass


def test_what_a_codec_does_not_produce_is_left_to_the_handler() -> None:
    checker = ArgumentChecker(converting)
    assert checker.check(["2026-11-25T10:00:00Z", {"x": 1}], {}) == (
        ["2026-11-25T10:00:00Z", {"x": 1}],
        {},
    ), "a datetime arrives as text and passes; a TypedDict is a model: validated"
    assert checker.check(["t", {"x": 2}], {"count": None})[1] == {"count": None}, "its default"
    with pytest.raises(InvalidArguments, match="count must be int"):
        checker.check(["t", {"x": 2}], {"count": "3"})
    with pytest.raises(InvalidArguments, match=r"where is not a valid Point: \$: .*`x`"):
        checker.check(["t", {}], {})


POSITIONAL = [1, 0.5, "x", ["a"], {"a": 1.5}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["1", *POSITIONAL[1:]], "count must be int, not str ('1')"),
        ([1, 0.5, "x", ["a", 2], {}], "tags must be list[str], not list"),
        ([*POSITIONAL, "reckless"], "mode must be Literal"),
        ([*POSITIONAL, "fast", 5], "note must be str | None, not int"),
        (POSITIONAL[:4], "missing a required argument: 'scores'"),
    ],
)
def test_positional_arguments_are_checked_like_keyword_ones(args: list[Any], message: str) -> None:
    """The positional-only call (checked without binding the signature) says what the
    general path says."""
    pattern = message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
    with pytest.raises(InvalidArguments, match=pattern.replace(")", r"\)").replace("|", r"\|")):
        ArgumentChecker(handler).check(args, {})


def test_positional_calls_of_small_handlers() -> None:
    def add(a: int, b: int = 0, /) -> int:
        return a + b

    def untyped(value):  # type: ignore[no-untyped-def]
        return value

    def keyword_only(value: int, *, scale: int) -> int:
        return value * scale

    assert ArgumentChecker(add).check([1], {}) == ([1], {})
    assert ArgumentChecker(add).check([1, 2], {}) == ([1, 2], {})
    assert ArgumentChecker(untyped).check([object], {}) == ([object], {})
    with pytest.raises(InvalidArguments, match="too many positional arguments"):
        ArgumentChecker(add).check([1, 2, 3], {})
    with pytest.raises(InvalidArguments, match="missing a required argument"):
        ArgumentChecker(untyped).check([], {})
    with pytest.raises(InvalidArguments, match="b must be int, not str"):
        ArgumentChecker(add).check([1, "2"], {})
    with pytest.raises(InvalidArguments, match="missing a required argument: 'scale'"):
        ArgumentChecker(keyword_only).check([1], {})


class Order(msgspec.Struct):
    id: int


class Invoice(pydantic.BaseModel):
    total: float


def ordering(
    order: Order | None,
    orders: list[Order],
    maybe: Optional[Order] = None,  # noqa: UP045 - the old spelling too
    by_name: dict[str, Order] | None = None,
    pair: tuple[Order, ...] = (),
    invoices: list[Invoice] | None = None,
    sloppy: Order = None,  # type: ignore[assignment]  # None by its default
) -> None:
    pass


def test_models_inside_optionals_and_containers_arrive_as_instances() -> None:
    checker = ArgumentChecker(ordering)
    kwargs = {
        "maybe": {"id": 3}, "by_name": {"a": {"id": 4}}, "pair": [{"id": 5}, {"id": 6}],
        "invoices": [{"total": 1.5}], "sloppy": None,
    }  # fmt: skip
    args, converted = checker.check([{"id": 1}, [{"id": 2}]], kwargs)
    assert args == [Order(1), [Order(2)]]
    assert converted == {
        "maybe": Order(3), "by_name": {"a": Order(4)}, "pair": (Order(5), Order(6)),
        "invoices": [Invoice(total=1.5)], "sloppy": None,
    }  # fmt: skip
    assert checker.check([None, []], {"maybe": None}) == ([None, []], {"maybe": None})
    assert checker.check([], {"order": None, "orders": [Order(7)]})[1]["orders"] == [Order(7)]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ([{"id": "one"}, []], {}, r"order is not a valid Order \| None: \$\.id: Expected `int`"),
        (["an order", []], {}, r"order is not a valid Order \| None: \$: Expected `object \| null`"),
        ([None, [{"id": 1}, {}]], {}, r"orders is not a valid list\[Order\]: \$\[1\]: Object missing"),
        ([None, []], {"invoices": [{"total": "lots"}]},
         r"invoices is not a valid list\[Invoice\] \| None: \$\[0\]\.total: Input should be"),
        ([None, "orders"], {}, r"orders must be list\[Order\], not str"),
    ],
)  # fmt: skip
def test_a_bad_model_inside_is_an_invalid_arguments_error_naming_the_parameter_and_field(
    args: list[Any], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArguments, match=message):
        ArgumentChecker(ordering).check(args, kwargs)


class Refund(msgspec.Struct):
    order: int


def test_a_hint_its_models_library_cannot_validate_is_refused_at_registration() -> None:
    def refunding(what: Order | Refund) -> None:
        pass

    with pytest.raises(ConfigurationError, match=r"refunding\(\), parameter what: .*cannot be"):
        ArgumentChecker(refunding)
