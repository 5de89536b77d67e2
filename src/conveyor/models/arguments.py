"""Checking a call's arguments against its function's signature and type hints: an RPC
request's against its handler (a call with wrong arguments is an error reply,
``InvalidArguments``, and the handler never runs with them) and a job's against its function
(it dies at once).

The checks follow what a JSON codec can carry: ``int`` (not ``bool``), ``float`` (an ``int``
too), ``str``, ``bool``, ``None``, ``list[T]`` / ``tuple[T, ...]`` / ``Sequence[T]``,
``dict[str, T]`` / ``Mapping``, unions (``X | None``), ``Literal[...]``, ``Any`` and
unannotated parameters (anything). A parameter typed with a model (a pydantic model, a
msgspec Struct, a dataclass, a TypedDict), or with models inside a hint (``Order | None``,
``list[Order]``, ``dict[str, Order]``, ``tuple[Order, ...]``), gets its JSON value validated
into instances; other annotations (a custom class) are passed through. Like the rest of
``models``, it imports no model library: the models' kinds are recognised by
``models.kinds``.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.models.codecs import converter, field_errors, model_name
from conveyor.models.kinds import models_in

__all__ = ["ArgumentChecker", "InvalidArguments"]

_WIRE_TYPES = (str, bool, dict, bytes)
"""The classes a request's values arrive as (besides int, float, list, tuple and None,
handled on their own)."""


class InvalidArguments(ConveyorError, TypeError):
    """The arguments of an RPC request or a job do not fit its function.

    Raised when a request's (or a job's) arguments do not fit the handler's signature and
    type hints: a missing or unknown parameter, a value of the wrong type; the message names
    the parameter. The handler never runs: the caller gets an ``InvalidArguments`` error reply
    (a :class:`~conveyor.errors.RemoteError`), a job goes to the dead-job topic at once. Also a
    ``TypeError``.

    What to do: call with arguments that fit, or deploy the handler that takes them (old
    clients may still send the old arguments).
    """


def _describe(hint: Any) -> str:
    return model_name(hint)


def _fits(value: Any, hint: Any) -> bool:
    try:
        return _check(value, hint)
    except TypeError:  # an annotation isinstance cannot take: passed through
        return True


def _check(value: Any, hint: Any) -> bool:
    if hint is Any or hint is inspect.Parameter.empty or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable):
        if not isinstance(value, list | tuple):
            return False
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        if origin is tuple and len(args) > 1:
            return len(value) == len(args) and all(
                _fits(v, a) for v, a in zip(value, args, strict=True)
            )
        return not args or all(_fits(item, args[0]) for item in value)
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return False
        pair = typing.get_args(hint)
        if not pair:
            return True
        key_hint, value_hint = pair
        return all(_fits(k, key_hint) and _fits(v, value_hint) for k, v in value.items())
    if hint in (list, tuple):
        return isinstance(value, list | tuple)
    if hint in _WIRE_TYPES:
        return isinstance(value, hint)
    # A class a codec does not produce by itself (a datetime, a dataclass, an Enum: the handler
    # converts it), a TypedDict or a Protocol: not checked here.
    return True


def _hint_to_check(hint: Any) -> Any:
    """``hint``, or ``None`` when any value fits it."""
    return None if hint is Any or hint is inspect.Parameter.empty or hint is object else hint


def _converter(handler: Callable[..., Any], name: str, hint: Any) -> Callable[[Any], Any]:
    """The converter of parameter ``name`` (typed ``hint``, with models in it).

    Raises:
        ConfigurationError: no library can validate ``hint`` (names the parameter).
    """
    try:
        return converter(hint)
    except ConfigurationError as error:
        function = getattr(handler, "__qualname__", repr(handler))
        raise ConfigurationError(f"{function}(), parameter {name}: {error}", name) from None


class ArgumentChecker:
    """The signature and type hints of one handler, checked per request."""

    def __init__(self, handler: Callable[..., Any]) -> None:
        self.signature = inspect.signature(handler)
        try:
            self.hints = typing.get_type_hints(handler)
        except Exception:  # unresolvable annotations: check the arity only
            self.hints = {}
        # The common call, positional arguments only, checked without Signature.bind (pure
        # Python, the largest part of a small handler's check): each parameter that takes a
        # position, with its hint (None: anything goes) and default.
        params = list(self.signature.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._by_position = [
            (p.name, _hint_to_check(self.hints.get(p.name, p.empty)), p.default) for p in positional
        ]
        self._required = sum(1 for p in positional if p.default is p.empty)
        # Keyword-only parameters without a default make every positional-only call wrong:
        # the general path says which is missing.
        self._positional_calls = not any(
            p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params
        )
        # Parameters typed with a model (pydantic, msgspec, dataclass, TypedDict), or with
        # models inside (Order | None, list[Order], dict[str, Order]): their JSON value is
        # validated into instances before the handler runs.
        self._models = {
            name: _converter(handler, name, hint)
            for name, hint in self.hints.items()
            if name != "return" and models_in(hint)
        }
        self._defaults = {name: p.default for name, p in self.signature.parameters.items()}
        self._positions = {p.name: index for index, p in enumerate(positional)}

    def check(self, args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
        """The arguments to call the handler with.

        Raises:
            InvalidArguments: the wrong number, an unknown name, or a value of the wrong type.
        """
        if not isinstance(args, list | tuple):
            raise InvalidArguments(f"args must be a list, not {type(args).__name__}")
        if not isinstance(kwargs, dict):
            raise InvalidArguments(f"kwargs must be a mapping, not {type(kwargs).__name__}")
        if (
            not kwargs
            and self._positional_calls
            and self._required <= len(args) <= len(self._by_position)
        ):
            for value, (name, hint, default) in zip(args, self._by_position, strict=False):
                if hint is not None and value is not default and not _fits(value, hint):
                    raise InvalidArguments(
                        f"{name} must be {_describe(hint)}, not {type(value).__name__} ({value!r})"
                    )
            return self._converted(list(args), {})
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise InvalidArguments(str(error)) from None
        for name, value in bound.arguments.items():
            parameter = self.signature.parameters[name]
            hint = self.hints.get(name, inspect.Parameter.empty)
            if value is parameter.default:  # its own default (x: int = None) is always fine
                continue
            if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
                bad = [v for v in value if not _fits(v, hint)]
            elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
                bad = [v for v in value.values() if not _fits(v, hint)]
            else:
                bad = [] if _fits(value, hint) else [value]
            if bad:
                raise InvalidArguments(
                    f"{name} must be {_describe(hint)}, not {type(bad[0]).__name__} ({bad[0]!r})"
                )
        return self._converted(list(args), dict(kwargs))

    def _converted(
        self, args: list[Any], kwargs: dict[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The arguments with each model-typed one validated into its model."""
        for name, convert in self._models.items():
            position = self._positions.get(name)
            if position is not None and position < len(args):
                args[position] = self._convert(name, convert, args[position])
            elif name in kwargs:
                kwargs[name] = self._convert(name, convert, kwargs[name])
        return args, kwargs

    def _convert(self, name: str, convert: Callable[[Any], Any], value: Any) -> Any:
        if (
            value is None and self._defaults.get(name, inspect.Parameter.empty) is None
        ):  # `order: Order = None`
            return None
        try:
            return convert(value)
        except Exception as error:
            errors = field_errors(error)
            if errors is None:
                raise
            reasons = "; ".join(f"{e.path}: {e.message}" for e in errors)
            raise InvalidArguments(
                f"{name} is not a valid {_describe(self.hints[name])}: {reasons}"
            ) from None
