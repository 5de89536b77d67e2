"""Decoding bytes into models (validated) and telling what was wrong when they are not.

A route's model gives its deserializer: the library's own function straight from bytes
(msgspec's ``Decoder.decode``, pydantic's ``model_validate_json``), with no layer of ours
between it and each payload; what a failure means (which field, what is wrong) is worked out
only when one happens (:func:`field_errors`)."""

from __future__ import annotations

import importlib.util
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ConfigurationError
from conveyor.models.kinds import (
    DATACLASS,
    KEY_SCALARS,
    MSGSPEC,
    PYDANTIC,
    model_kind,
    models_in,
)

__all__ = [
    "FieldError",
    "converter",
    "decoder",
    "field_errors",
    "json_schema",
    "key_decoder",
    "model_name",
]

_MAX_ERRORS = 20  # a payload wrong in every field says enough with its first twenty


@dataclass(frozen=True, slots=True)
class FieldError:
    """One reason a payload (or key) is not a valid model: where (``path``, JSONPath from
    ``$``, the whole value) and what is wrong (``message``, the model library's words)."""

    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


def model_name(model: Any) -> str:
    """``model`` as a person reads it: ``Order``, ``list[Order]``, ``Order | None``."""
    return _hint_name(model, _MAX_NAME_DEPTH)


_MAX_NAME_DEPTH = 8  # deeper than any hint a person writes: the rest as Python shows it


def _hint_name(hint: Any, depth: int) -> str:
    if hint is None or hint is type(None):
        return "None"
    if hint is Ellipsis:
        return "..."
    if isinstance(hint, type):
        return hint.__qualname__
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if depth <= 0 or origin is None or not arguments or origin is typing.Literal:
        return repr(hint).replace("typing.", "").replace("collections.abc.", "")
    names = [_hint_name(argument, depth - 1) for argument in arguments]
    if origin in (typing.Union, types.UnionType):
        return " | ".join(names)
    return f"{getattr(origin, '__name__', None) or _hint_name(origin, 0)}[{', '.join(names)}]"


def _library(kind: str, model: Any, role: str) -> str:
    """Which library decodes ``model``: its own, or for dataclasses and TypedDicts msgspec
    when installed, else pydantic."""
    if kind in (PYDANTIC, MSGSPEC):
        return kind
    if hasattr(model, "__pydantic_validator__"):  # a pydantic dataclass: its validators count
        return PYDANTIC
    for library in (MSGSPEC, PYDANTIC):
        if importlib.util.find_spec(library) is not None:
            return library
    raise ConfigurationError(
        f"the {role} model {model_name(model)} is a {kind}: decoding it needs msgspec or "
        "pydantic installed (pip install msgspec)",
        role,
    )


def decoder(model: Any, role: str = "payload") -> Callable[[bytes], Any]:
    """The function that turns a JSON payload into a validated ``model`` instance.

    Raises:
        ConfigurationError: ``model`` is not a model Conveyor knows (names ``role``).
    """
    kind = model_kind(model)
    if kind is None:
        raise ConfigurationError(
            f"{model_name(model)} is not a model for a {role}: use a pydantic model, a msgspec "
            "Struct, a dataclass or a TypedDict",
            role,
        )
    library = _library(kind, model, role)
    if library == MSGSPEC:
        import msgspec  # noqa: PLC0415 - optional: only for models of it

        return msgspec.json.Decoder(model).decode
    if kind == PYDANTIC:
        return model.model_validate_json  # type: ignore[no-any-return]
    import pydantic  # noqa: PLC0415 - optional: only for models of it

    return pydantic.TypeAdapter(model).validate_json


def converter(model: Any, role: str = "argument") -> Callable[[Any], Any]:
    """The function that turns decoded JSON (dicts, lists) into a validated ``model``
    instance (an RPC argument or result); an instance of it already passes as it is.

    ``model`` may also be a type hint with models inside (``Order | None``, ``list[Order]``,
    ``dict[str, Order]``, ``tuple[Order, ...]``): the value is validated into it as a whole
    by the models' library, so a wrong item is named by its path (``$[1].id``).

    Raises:
        ConfigurationError: ``model`` is not a model Conveyor knows, or a hint its models'
            library cannot validate (names ``role``).
    """
    kind = model_kind(model)
    if kind is None:
        if models_in(model):
            return _hint_converter(model, role)
        raise ConfigurationError(f"{model_name(model)} is not a model for an {role}", role)
    library = _library(kind, model, role)
    if library == MSGSPEC:
        import msgspec  # noqa: PLC0415 - optional: only for models of it

        def convert(value: Any) -> Any:
            return value if _is_instance(value, model) else msgspec.convert(value, model)

        return convert
    if kind == PYDANTIC:
        return model.model_validate  # type: ignore[no-any-return]
    import pydantic  # noqa: PLC0415 - optional: only for models of it

    return pydantic.TypeAdapter(model).validate_python


def _hint_converter(hint: Any, role: str) -> Callable[[Any], Any]:
    """:func:`converter` of a type hint with models inside, by the one library that validates
    all of them: pydantic for pydantic models, msgspec for Structs; dataclasses and TypedDicts
    alone as :func:`decoder` chooses."""
    models = models_in(hint)
    pydantic_models = [
        m for m in models if model_kind(m) == PYDANTIC or hasattr(m, "__pydantic_validator__")
    ]
    if pydantic_models and any(model_kind(m) == MSGSPEC for m in models):
        raise ConfigurationError(
            f"the {role} type {model_name(hint)} mixes pydantic models and msgspec Structs: "
            "one library validates the whole value, so use models of one of them",
            role,
        )
    if pydantic_models:
        library = PYDANTIC
    elif any(model_kind(m) == MSGSPEC for m in models):
        library = MSGSPEC
    else:
        library = _library(model_kind(models[0]) or DATACLASS, models[0], role)
    try:
        if library == MSGSPEC:
            import msgspec  # noqa: PLC0415 - optional: only for models of it

            msgspec.json.Decoder(hint)  # refuses, now, a hint msgspec cannot validate

            def convert(value: Any) -> Any:
                return msgspec.convert(value, hint)

            return convert
        import pydantic  # noqa: PLC0415 - optional: only for models of it

        return pydantic.TypeAdapter(hint).validate_python
    except TypeError as error:  # (pydantic's schema errors are TypeErrors too)
        raise ConfigurationError(
            f"the {role} type {model_name(hint)} cannot be validated by {library}: {error}", role
        ) from None


def _is_instance(value: Any, model: Any) -> bool:
    return isinstance(model, type) and not _is_typeddict(model) and isinstance(value, model)


def _is_typeddict(model: Any) -> bool:
    return model_kind(model) == "TypedDict"


def key_decoder(model: Any) -> Callable[[bytes], Any]:
    """A key model's decoder: ``str``, ``int`` and ``UUID`` from the key's text, models from JSON."""
    if model is str:
        return _text
    if model is int:
        return int
    if model is uuid.UUID:
        return _uuid
    if model in KEY_SCALARS:  # pragma: no cover - every scalar is handled above
        raise AssertionError(model)
    return decoder(model, role="key")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8")


def _uuid(raw: bytes) -> uuid.UUID:
    return uuid.UUID(raw.decode("ascii"))


def field_errors(error: BaseException) -> list[FieldError] | None:
    """What ``error`` (raised by a model's decoder) says is wrong, field by field; ``None``
    when it is not a validation failure (a bug in a custom type, say)."""
    kind = type(error)
    module = kind.__module__.split(".")[0]
    if module in ("pydantic", "pydantic_core") and hasattr(error, "errors"):
        return [
            FieldError(_path(item.get("loc", ())), str(item.get("msg", "")))
            for item in error.errors(include_url=False)[:_MAX_ERRORS]
        ]
    if module == "msgspec":
        text = str(error)
        message, separator, where = text.rpartition(" - at `")
        if separator:
            return [FieldError(where.rstrip("`"), message)]
        return [FieldError("$", text)]
    if isinstance(error, ValueError | UnicodeDecodeError):  # a scalar key: int, UUID, text
        return [FieldError("$", str(error))]
    return None


def _path(location: Any) -> str:
    """pydantic's ``loc`` as JSONPath: ``("items", 0, "price")`` -> ``$.items[0].price``."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def json_schema(model: Any, ref_template: str = "#/$defs/{model}") -> dict[str, Any]:
    """``model``'s JSON Schema, by the library that decodes it; the models it refers to are
    under ``$defs``, referred to by ``ref_template`` (``{model}`` is the name)."""
    kind = model_kind(model)
    if kind is None:
        if model is str or model is uuid.UUID:
            return {"type": "string", **({"format": "uuid"} if model is uuid.UUID else {})}
        if model is int:
            return {"type": "integer"}
        raise ConfigurationError(f"{model_name(model)} is not a model", "model")
    library = _library(kind, model, "model")
    if library == MSGSPEC:
        import msgspec  # noqa: PLC0415 - optional: only for models of it

        (schema,), definitions = msgspec.json.schema_components(
            (model,), ref_template=ref_template.replace("{model}", "{name}")
        )
        return {**schema, "$defs": definitions} if definitions else schema
    if kind == PYDANTIC:
        return model.model_json_schema(ref_template=ref_template)  # type: ignore[no-any-return]
    import pydantic  # noqa: PLC0415 - optional: only for models of it

    return pydantic.TypeAdapter(model).json_schema(ref_template=ref_template)
