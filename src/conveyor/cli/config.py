"""``conveyor config``: each effective setting of an app and where it came from."""

from __future__ import annotations

import json
import os
from dataclasses import fields

import click

from conveyor.app import App
from conveyor.cli.loading import app_option, json_option, load_app
from conveyor.cli.logs import LOG_FORMAT_ENV, LOG_LEVEL_ENV
from conveyor.cli.output import console, table
from conveyor.driver.loop_serving import SWITCH
from conveyor.environment import OTHER_VARIABLES
from conveyor.errors import ConfigurationError
from conveyor.masking import MASK, is_secret, shown_setting
from conveyor.web.signing import KEY_ENV, commands_key

__all__ = ["config"]

_NOT_SHOWN = ("kafka", "sources", "oauth_token_provider")
_COMMAND_LINE = {
    LOG_LEVEL_ENV: "INFO (conveyor web: WARNING)",
    LOG_FORMAT_ENV: "text",
    SWITCH: "1 (on where it is available)",
}


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
    for name, default in _COMMAND_LINE.items():
        value = os.environ.get(name)
        rows.append((name, value or default, f"${name}" if value else "default"))
    rows.append(_commands_key(app))
    for name in sorted(v.name for v in OTHER_VARIABLES if v.secret and v.name != KEY_ENV):
        value = os.environ.get(name)
        rows.append((name, MASK if value else "not set", f"${name}" if value else "-"))
    if as_json:
        click.echo(json.dumps([{"setting": s, "value": v, "source": f} for s, v, f in rows]))
        return
    console.print(table(f"Settings of {settings.client_id}", ["setting", "value", "from"], rows))


def _commands_key(app: App) -> tuple[str, str, str]:
    """The commands key's row: set (masked) and where from, not set, or why it is refused."""
    source = app.web.commands_key_source
    if source is not None:
        return ("commands key", MASK, source)
    try:
        key = commands_key()
    except ConfigurationError as exc:
        return ("commands key", f"refused: {exc}", f"${KEY_ENV}")
    return ("commands key", MASK, f"${KEY_ENV}") if key else ("commands key", "not set", "-")
