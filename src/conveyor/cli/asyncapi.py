"""``conveyor asyncapi``: the app's AsyncAPI 3.0 document, as YAML or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import click

from conveyor.asyncapi import asyncapi_document, to_yaml
from conveyor.cli.loading import app_option, load_app
from conveyor.cli.output import console

__all__ = ["asyncapi"]


@click.command()
@app_option("The app to describe, e.g. shop.app:app (default: $CONVEYOR_APP).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="The document's format.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the document to this file (default: standard output).",
)
@click.option("--title", help="The document's title (default: the app's client_id).")
@click.option(
    "--version",
    "version",
    default="1.0.0",
    show_default=True,
    help="The version of the application the document describes.",
)
def asyncapi(
    app_spec: str | None, output_format: str, output: Path | None, title: str | None, version: str
) -> None:
    """Write the app's AsyncAPI 3.0 document: its servers, a channel per topic, what it
    receives (routes, RPC commands) and sends (DLQs, RPC replies, declared produces), and its
    messages' schemas from the consumers' models."""
    document = asyncapi_document(load_app(app_spec), title=title, version=version)
    text = to_yaml(document) if output_format == "yaml" else json.dumps(document, indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    console.print(
        f"wrote {output} ({len(document['channels'])} channels, "
        f"{len(document['operations'])} operations)"
    )
