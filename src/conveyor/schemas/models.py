"""The JSON Schemas of a typed app's models in a Schema Registry: checked for compatibility
with what the registry holds, and registered, under each topic's subjects (``orders-value``
for the payload model, ``orders-key`` for a model key), as the registry's JSON Schema type.

``conveyor schemas check`` and ``conveyor schemas register`` run these; ``conveyor topics
migrate --schema-registry URL`` checks first and migrates nothing when a model is not
compatible, then registers them once the topics are migrated."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conveyor.models import json_schema, model_kind
from conveyor.models.codecs import model_name

if TYPE_CHECKING:
    from conveyor.routing.topic import Topic
    from conveyor.schemas import SchemaRegistry

__all__ = ["ModelSchema", "check_models", "model_schemas", "register_models"]

NEW, COMPATIBLE, INCOMPATIBLE, REGISTERED, FAILED = (
    "new",
    "compatible",
    "incompatible",
    "registered",
    "failed",
)


@dataclass(frozen=True)
class ModelSchema:
    """One model under one subject, and what the registry said of it: ``state`` is ``new``
    (no such subject yet), ``compatible``, ``incompatible`` (the registry's compatibility
    rule refuses it: nothing is registered), ``registered`` (with its ``id``) or ``failed``
    (``detail`` says why)."""

    subject: str
    topic: str
    model: str
    schema: str
    state: str = ""
    id: int | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "topic": self.topic,
            "model": self.model,
            "state": self.state,
            "id": self.id,
            "detail": self.detail,
        }


def model_schemas(routes: Iterable[Topic]) -> list[ModelSchema]:
    """The subjects of the routes' models: ``<topic>-value`` per payload model and
    ``<topic>-key`` per key model (plain ``str``/``int``/``UUID`` keys have no subject)."""
    found: dict[str, ModelSchema] = {}
    for route in routes:
        if route.pattern is not None:
            continue  # no one topic: no subject
        for suffix, model in (
            ("value", route.deserializers.payload_model),
            ("key", route.deserializers.key_model),
        ):
            if model is None or model_kind(model) is None:
                continue
            subject = f"{route.name}-{suffix}"
            text = json.dumps(json_schema(model), sort_keys=True)
            found.setdefault(subject, ModelSchema(subject, route.name, model_name(model), text))
    return list(found.values())


def check_models(registry: SchemaRegistry, routes: Iterable[Topic]) -> list[ModelSchema]:
    """Each model's compatibility with the latest schema of its subject."""
    Schema, SchemaRegistryError = _registry_types()
    checked = []
    for entry in model_schemas(routes):
        try:
            fits = registry.client.test_compatibility(entry.subject, Schema(entry.schema, "JSON"))
        except SchemaRegistryError as error:
            if error.http_status_code == 404:  # no such subject (or version) yet
                checked.append(_with(entry, NEW))
                continue
            checked.append(_with(entry, FAILED, detail=str(error)))
            continue
        except Exception as error:  # the registry cannot be reached: said, not a traceback
            checked.append(_with(entry, FAILED, detail=f"{type(error).__name__}: {error}"))
            continue
        checked.append(
            _with(
                entry,
                COMPATIBLE if fits else INCOMPATIBLE,
                detail="" if fits else "the registry's compatibility rule refuses it",
            )
        )
    return checked


def register_models(registry: SchemaRegistry, routes: Iterable[Topic]) -> list[ModelSchema]:
    """Check each model, then register the new and compatible ones (an incompatible one is
    left as it was: the registry keeps its current version)."""
    Schema, _ = _registry_types()
    results = []
    for entry in check_models(registry, routes):
        if entry.state not in (NEW, COMPATIBLE):
            results.append(entry)
            continue
        try:
            schema_id = registry.client.register_schema(entry.subject, Schema(entry.schema, "JSON"))
        except Exception as error:  # SchemaRegistryError, or the registry out of reach
            results.append(_with(entry, FAILED, detail=f"{type(error).__name__}: {error}"))
            continue
        results.append(_with(entry, REGISTERED, id=schema_id))
    return results


def _registry_types() -> tuple[Any, Any]:
    """The registry client's ``Schema`` and ``SchemaRegistryError`` (the schemas extra)."""
    from conveyor.schemas import _import  # noqa: PLC0415 - the package imports this module

    registry = _import("confluent_kafka.schema_registry")
    return registry.Schema, _import("confluent_kafka.schema_registry.error").SchemaRegistryError


def _with(entry: ModelSchema, state: str, **updates: Any) -> ModelSchema:
    return ModelSchema(**{**entry.__dict__, "state": state, **updates})
