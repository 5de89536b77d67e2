"""What kind of model a type is: a pydantic model, a msgspec Struct, a dataclass, a TypedDict.

The libraries are optional: a type can only be a pydantic model or a msgspec Struct when its
library was imported (defining the type imported it), so the checks look in ``sys.modules``
and never import a library themselves."""

from __future__ import annotations

import dataclasses
import sys
import typing
import uuid
from typing import Any

__all__ = [
    "DATACLASS",
    "KEY_SCALARS",
    "MSGSPEC",
    "PYDANTIC",
    "TYPEDDICT",
    "instance_kind",
    "model_kind",
    "models_in",
]

PYDANTIC, MSGSPEC, DATACLASS, TYPEDDICT = "pydantic", "msgspec", "dataclass", "TypedDict"

KEY_SCALARS: tuple[type, ...] = (str, int, uuid.UUID)
"""Key types read from (and written as) the key's text rather than JSON."""


def _is_subclass(model: Any, module: str, name: str) -> bool:
    library = sys.modules.get(module)
    base = getattr(library, name, None) if library is not None else None
    return base is not None and isinstance(model, type) and issubclass(model, base)


def model_kind(model: Any) -> str | None:
    """``model``'s kind (``"pydantic"``, ``"msgspec"``, ``"dataclass"``, ``"TypedDict"``), or
    ``None`` when it is none of them."""
    if _is_subclass(model, "pydantic", "BaseModel"):
        return PYDANTIC
    if _is_subclass(model, "msgspec", "Struct"):
        return MSGSPEC
    if isinstance(model, type) and dataclasses.is_dataclass(model):
        return DATACLASS
    if typing.is_typeddict(model) or _typing_extensions_typeddict(model):
        return TYPEDDICT
    return None


def models_in(hint: Any) -> list[Any]:
    """The models a type hint names, in order, each once: ``hint`` itself when it is one, else
    those inside its arguments (``Order | None``, ``list[Order]``, ``dict[str, Order]``...);
    ``[]`` when it names none."""
    found: list[Any] = []
    pending = [hint]
    for _ in range(_MAX_HINT_NODES):  # a hint is a small tree: bounded all the same
        if not pending:
            break
        node = pending.pop()
        if model_kind(node) is not None:
            if node not in found:
                found.append(node)
        elif typing.get_origin(node) is not typing.Literal:  # a Literal's arguments are values
            pending.extend(reversed(typing.get_args(node)))
    return found


_MAX_HINT_NODES = 1_000


def _typing_extensions_typeddict(model: Any) -> bool:
    extensions = sys.modules.get("typing_extensions")
    return extensions is not None and bool(extensions.is_typeddict(model))


def instance_kind(value: Any) -> str | None:
    """The kind of model ``value`` is an instance of (TypedDicts are plain dicts: ``None``)."""
    kind = model_kind(type(value))
    return None if kind == TYPEDDICT else kind
