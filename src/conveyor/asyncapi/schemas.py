"""JSON Schemas for an AsyncAPI document: a model's schema with its definitions moved into
``components.schemas`` (a ``$ref`` in AsyncAPI is resolved from the document's root, so a
model's own ``#/$defs/...`` would point nowhere), and schemas for plain type hints."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import types
import typing
import uuid
from typing import Any

from conveyor.models.codecs import json_schema
from conveyor.models.kinds import model_kind

__all__ = ["SchemaBook"]

REF = "#/components/schemas/{model}"
_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
    uuid.UUID: {"type": "string", "format": "uuid"},
    dict: {"type": "object"},
    list: {"type": "array"},
}


@dataclasses.dataclass
class SchemaBook:
    """The schemas one document shares (``components.schemas``), filled as models are met.

    Each model (and each model or enum it refers to) is one component, named as its library
    names it (``Order``). Two different classes of one name (``shop.Order``,
    ``billing.Order``) would be one component: the second is met under a name of its own
    (``Order_2``) and the name is noted in :attr:`clashes`; a document built again with
    ``qualify=clashes`` names every class of those names by its module (``shop.Order``,
    ``billing.Order``), whichever comes first."""

    components: dict[str, Any] = dataclasses.field(default_factory=dict)
    qualify: frozenset[str] = frozenset()
    """Names that stand for more than one class: such classes go by their module's name."""
    clashes: set[str] = dataclasses.field(default_factory=set)
    """Names met for more than one class (or schema) in this book."""
    _owners: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> what it is
    _placed: dict[Any, str] = dataclasses.field(default_factory=dict)  # what it is -> name
    _names: dict[Any, str] = dataclasses.field(default_factory=dict)  # model -> its component

    def of(self, hint: Any) -> dict[str, Any]:
        """The schema of ``hint``: a model (its definitions kept here), a plain type, a
        container of them; ``{}`` (anything) when it says nothing a schema can."""
        if hint is None or hint is Any:
            return {}
        if model_kind(hint) is not None:
            return self._model(hint)
        if hint in _SCALARS:
            return dict(_SCALARS[hint])
        origin, arguments = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.of(option) for option in arguments]}
        if origin in (list, tuple, set, frozenset) or (
            origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable")
        ):
            items = [a for a in arguments if a is not Ellipsis]
            return {"type": "array", **({"items": self.of(items[0])} if items else {})}
        if origin is dict or getattr(origin, "__name__", "") == "Mapping":
            return {
                "type": "object",
                **({"additionalProperties": self.of(arguments[1])} if len(arguments) == 2 else {}),
            }
        if origin is typing.Literal:
            return {"enum": list(arguments)}
        return {}

    def name_of(self, model: Any) -> str | None:
        """The component name of ``model``, once :meth:`of` met it."""
        return self._names.get(model)

    def _model(self, model: Any) -> dict[str, Any]:
        if model in self._names:
            return {"$ref": REF.format(model=self._names[model])}
        schema = json_schema(model, ref_template=REF)
        definitions: dict[str, Any] = schema.pop("$defs", {})
        own = _referred(schema)  # msgspec: the model itself is a definition already
        if own is None:
            own = _name(model)
            definitions = {own: schema, **definitions}
        classes = _classes_by_name(model)
        renames = {}
        for name, definition in definitions.items():
            found = model if name == own else classes.get(name)
            renames[name] = self._place(name, found, definition)
        for name, definition in definitions.items():
            self.components.setdefault(renames[name], _renamed(definition, renames))
        self._names[model] = renames[own]
        return {"$ref": REF.format(model=renames[own])}

    def _place(self, name: str, found: type | None, definition: dict[str, Any]) -> str:
        """The component name of definition ``name`` (of class ``found``, when known)."""
        identity: Any = found if found is not None else json.dumps(definition, sort_keys=True)
        placed = self._placed.get(identity)
        if placed is not None:
            return placed
        base = _key(name)
        if found is not None and base in self.qualify:
            base = _key(f"{found.__module__}.{found.__qualname__}")
        candidate = base
        for number in range(2, len(self._owners) + 3):  # one of these is free
            owner = self._owners.get(candidate)
            if owner is None:
                break
            self.clashes.add(_key(name))
            candidate = f"{base}_{number}"
        self._owners[candidate] = identity
        self._placed[identity] = candidate
        return candidate


def _referred(schema: dict[str, Any]) -> str | None:
    """The component a schema that is only a reference refers to."""
    reference = schema.get("$ref") if len(schema) == 1 else None
    prefix = REF.format(model="")
    if isinstance(reference, str) and reference.startswith(prefix):
        return reference[len(prefix) :]
    return None


def _renamed(value: Any, renames: dict[str, str]) -> Any:
    """``value`` with its references to the ``renames``' keys pointing to their new names."""
    if isinstance(value, dict):
        referred = _referred({"$ref": value["$ref"]}) if "$ref" in value else None
        return {
            key: (
                REF.format(model=renames.get(referred, referred))
                if key == "$ref" and referred is not None
                else _renamed(item, renames)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_renamed(item, renames) for item in value]
    return value


_MAX_CLASSES = 1_000  # a model refers to a few dozen at most: bounded all the same


def _classes_by_name(model: Any) -> dict[str, type]:
    """The classes ``model`` refers to (itself, its fields' types, theirs ...) by each name
    a model library gives a definition (``Order``, ``shop.Order``); a name two of them share
    is left out (its definition is told apart by its schema)."""
    seen: set[type] = set()
    pending = [model]
    for _ in range(_MAX_CLASSES):
        if not pending:
            break
        node = pending.pop()
        if not isinstance(node, type):
            pending.extend(typing.get_args(node))
        elif node not in seen and node.__module__ != "builtins":
            seen.add(node)
            if model_kind(node) is not None:
                # an annotation that does not resolve: its definition is told by its schema
                with contextlib.suppress(Exception):
                    pending.extend(typing.get_type_hints(node).values())
    by_name: dict[str, type] = {}
    shared: set[str] = set()
    for found in seen:
        for name in {
            found.__name__,
            found.__qualname__,
            f"{found.__module__}.{found.__qualname__}",
        }:
            if by_name.setdefault(name, found) is not found:
                shared.add(name)
    return {name: found for name, found in by_name.items() if name not in shared}


def _key(text: str) -> str:
    """``text`` as a component name (AsyncAPI keys match ``^[a-zA-Z0-9.\\-_]+$``)."""
    return re.sub(r"[^a-zA-Z0-9.\-_]", "_", text)


def _name(model: Any) -> str:
    """A component name for ``model``."""
    return _key(getattr(model, "__name__", None) or str(model))
