"""``conveyor schemas check | register``: a typed app's models in a Schema Registry."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import click

from conveyor.cli.loading import app_option, json_option, load_app
from conveyor.cli.output import console, table
from conveyor.schemas import SchemaRegistry
from conveyor.schemas.models import FAILED, INCOMPATIBLE, ModelSchema, check_models, register_models

__all__ = ["registry_option", "schemas", "schemas_table"]

_app_option = app_option("The app whose models to check (default: $CONVEYOR_APP).")
registry_option = click.option(
    "--schema-registry",
    "registry_url",
    envvar="CONVEYOR_SCHEMA_REGISTRY",
    metavar="URL",
    help="The Schema Registry (default: $CONVEYOR_SCHEMA_REGISTRY).",
)


@click.group()
def schemas() -> None:
    """The JSON Schemas of the app's models in a Schema Registry (the schemas extra)."""


def schemas_table(title: str, entries: Sequence[ModelSchema]) -> None:
    """The models, their subjects and what the registry said, as a table."""
    rows = [
        (
            entry.subject,
            entry.model,
            entry.state,
            "" if entry.id is None else str(entry.id),
            entry.detail,
        )
        for entry in entries
    ]
    console.print(table(title, ["subject", "model", "state", "id", "detail"], rows))
    if not entries:
        console.print("no route has a model (declare one: class Orders(Consumer[Order]))")


def _run(app_spec: str | None, registry_url: str | None, as_json: bool, register: bool) -> None:
    if not registry_url:
        raise click.UsageError(
            "give the registry: --schema-registry URL (or $CONVEYOR_SCHEMA_REGISTRY)"
        )
    app = load_app(app_spec)
    with SchemaRegistry(registry_url) as registry:
        entries = (register_models if register else check_models)(registry, app.routes)
    if as_json:
        click.echo(json.dumps([entry.as_dict() for entry in entries]))
    else:
        schemas_table("Registered" if register else "Compatibility", entries)
    if any(entry.state in (INCOMPATIBLE, FAILED) for entry in entries):
        sys.exit(1)


@schemas.command("check")
@_app_option
@registry_option
@json_option()
def schemas_check(app_spec: str | None, registry_url: str | None, as_json: bool) -> None:
    """Check each model against its subject's latest schema (exit 1 when one is not compatible)."""
    _run(app_spec, registry_url, as_json, register=False)


@schemas.command("register")
@_app_option
@registry_option
@json_option()
def schemas_register(app_spec: str | None, registry_url: str | None, as_json: bool) -> None:
    """Register each new or compatible model under its subject (an incompatible one is not)."""
    _run(app_spec, registry_url, as_json, register=True)
