"""JSON Schemas for an AsyncAPI document: a model's schema with its definitions moved into
``components.schemas`` (a ``$ref`` in AsyncAPI is resolved from the document's root, so a
model's own ``#/$defs/...`` would point nowhere), and schemas for plain type hints."""

from __future__ import annotations

import dataclasses
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
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"},
    bool: {"type": "boolean"}, type(None): {"type": "null"}, bytes: {"type": "string"},
    uuid.UUID: {"type": "string", "format": "uuid"}, dict: {"type": "object"},
    list: {"type": "array"},
}  # fmt: skip


@dataclasses.dataclass
class SchemaBook:
    """The schemas one document shares (``components.schemas``), filled as models are met."""

    components: dict[str, Any] = dataclasses.field(default_factory=dict)

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
            return {"type": "object", **({"additionalProperties": self.of(arguments[1])} if len(arguments) == 2 else {})}  # fmt: skip
        if origin is typing.Literal:
            return {"enum": list(arguments)}
        return {}

    def _model(self, model: Any) -> dict[str, Any]:
        schema = json_schema(model, ref_template=REF)
        for name, definition in schema.pop("$defs", {}).items():
            self.components.setdefault(name, definition)
        name = _name(model)
        if "$ref" in schema:  # msgspec: the model itself is a definition already
            return schema
        self.components.setdefault(name, schema)
        return {"$ref": REF.format(model=name)}


def _name(model: Any) -> str:
    """A component name for ``model`` (AsyncAPI keys match ``^[a-zA-Z0-9.\\-_]+$``)."""
    return re.sub(r"[^a-zA-Z0-9.\-_]", "_", getattr(model, "__name__", None) or str(model))
