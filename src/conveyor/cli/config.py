"""``conveyor config``: each effective setting of an app and where it came from."""

from __future__ import annotations

import json
import os
from dataclasses import fields

import click

from conveyor.cli.loading import app_option, json_option, load_app
from conveyor.cli.logs import LOG_FORMAT_ENV, LOG_LEVEL_ENV
from conveyor.cli.output import console, table
from conveyor.environment import OTHER_VARIABLES
from conveyor.masking import MASK, is_secret, shown_setting

__all__ = ["config"]

_NOT_SHOWN = ("kafka", "sources", "oauth_token_provider")
_COMMAND_LINE = {LOG_LEVEL_ENV: "INFO", LOG_FORMAT_ENV: "text"}


@click.command()
@app_option("The app whose settings to show (default: $CONVEYOR_APP).")
@json_option()
def config(app_spec: str | None, as_json: bool) -> None:
    """Show each effective setting of the app and where it came from: the code (argument),
    an environment variable, or Conveyor's default (secrets masked)."""
    app = load_app(app_spec)
    settings = app.settings
    rows: list[tuple[str, str, str]] = []
    for field in fields(settings):
        if field.name in _NOT_SHOWN:
            continue
        source = settings.sources.get(field.name, "default")
        rows.append((field.name, shown_setting(getattr(settings, field.name)), source))
    if settings.oauth_token_provider is not None:
        rows.append(
            ("oauth_token_provider", shown_setting(settings.oauth_token_provider), "argument")
        )
    for name, value in sorted(settings.kafka.items()):
        shown = MASK if is_secret(name) else shown_setting(value)
        rows.append((f"kafka: {name}", shown, settings.sources.get(f"kafka: {name}", "conveyor")))
    secrets = {variable.name for variable in OTHER_VARIABLES if variable.secret}
    for name, default in _COMMAND_LINE.items():
        value = os.environ.get(name)
        rows.append((name, value or default, f"${name}" if value else "default"))
    for name in sorted(secrets):
        value = os.environ.get(name)
        rows.append((name, MASK if value else "not set", f"${name}" if value else "-"))
    if as_json:
        click.echo(json.dumps([{"setting": s, "value": v, "source": f} for s, v, f in rows]))
        return
    console.print(table(f"Settings of {settings.client_id}", ["setting", "value", "from"], rows))
