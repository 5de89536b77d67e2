"""``conveyor web``: serve the web UI, and manage its topics (install, migrate, reset,
uninstall) through the declarative-topics code."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys

import click

from conveyor.admin import migrate, plan
from conveyor.app import App
from conveyor.cli.loading import app_option, load_app
from conveyor.cli.logs import Say, configure_logging, log_options
from conveyor.cli.output import changes_table, confirm, console, progress
from conveyor.errors import ConfigurationError, KafkaError

__all__ = ["web"]

_MATCHES = "the web UI's topics are as they should be"

_app_option = app_option("The app whose kafka settings to use (default: $CONVEYOR_APP).")
_yes_option = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
_replication_option = click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="Replicas of each web topic (on a new install or reset; default: the cluster's "
    "default.replication.factor).",
)


@click.group(invoke_without_command=True)
@_app_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(min=0, max=65535), default=9000, show_default=True)
@click.option("--no-aggregate", is_flag=True, help="Do not run an aggregator in this process.")
@click.option(
    "--read-only",
    is_flag=True,
    help="Hide and refuse every action (republish, redrive, commands).",
)
@log_options(default_level="WARNING")
@click.pass_context
def web(
    ctx: click.Context,
    app_spec: str | None,
    host: str,
    port: int,
    no_aggregate: bool,
    read_only: bool,
    log_level: str,
    log_format: str,
) -> None:
    """Serve the web UI of an app (subcommands manage its topics).

    A password login comes from the app (app.web.protect(password_hash=...)) or from
    $CONVEYOR_WEB_PASSWORD_HASH (see `conveyor web hash-password`); $CONVEYOR_WEB_SECRET signs
    the session cookies (random per start when not set)."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        import uvicorn  # noqa: PLC0415 - the web extra, needed only to serve
    except ImportError as exc:
        raise ConfigurationError(
            f"conveyor web needs the web extra: pip install 'conveyor[web]' ({exc})", "web"
        ) from exc
    configure_logging(log_level, log_format)
    say = Say(log_format)
    app = load_app(app_spec)
    _access_from_environment(app, read_only)
    if not app.web.access.closed and host not in ("127.0.0.1", "localhost", "::1"):
        say(
            f"[yellow]warning:[/] the UI on {host} is open to anyone who reaches it, actions "
            "included: set a password (conveyor web hash-password) or --read-only",
            logging.WARNING,
            event="web.open",
        )
    aggregator = None if no_aggregate else (app.web.aggregator or app.web.new_aggregator())
    if aggregator is not None:
        aggregator.start()
    asgi = app.web.asgi()
    say(
        f"[bold]Conveyor web UI[/] of {app.settings.client_id} at http://{host}:{port}/ "
        f"({'aggregating' if aggregator else 'not aggregating'}; Ctrl-C stops)",
        event="web.starting",
        client=app.settings.client_id,
    )
    try:  # uvicorn's lines go through the logging set up above (text or JSON)
        uvicorn.run(
            asgi,
            host=host,
            port=port,
            log_level=log_level.lower(),
            access_log=False,
            log_config=None,
        )
    finally:
        if aggregator is not None:
            aggregator.stop()
        app.web.data.stop()
        app.producer.close(5)


def _access_from_environment(app: App, read_only: bool) -> None:
    """--read-only, $CONVEYOR_WEB_PASSWORD_HASH and $CONVEYOR_WEB_SECRET over the app's own
    access settings (a password only when the app set no login of its own)."""
    access = app.web.access
    changes: dict[str, object] = {}
    if read_only:
        changes["read_only"] = True
    password_hash = os.environ.get("CONVEYOR_WEB_PASSWORD_HASH")
    if password_hash and not access.closed:
        changes["password_hash"] = password_hash
    secret = os.environ.get("CONVEYOR_WEB_SECRET")
    if secret:
        changes["secret"] = secret.encode("utf-8")
    if changes:
        app.web.access = dataclasses.replace(access, **changes)  # type: ignore[arg-type]


@web.command("hash-password")
@click.password_option(help="The password (asked for when not given).")
def hash_password_command(password: str) -> None:
    """Print the hash of a password for app.web.protect(password_hash=...) or
    $CONVEYOR_WEB_PASSWORD_HASH (scrypt, salted; the password itself is kept nowhere)."""
    from conveyor.web.access import hash_password  # noqa: PLC0415

    console.print(hash_password(password), highlight=False, soft_wrap=True)


def _apply(app: App, replication_factor: int | None, title: str) -> None:
    declared = app.web.topics.declared(replication_factor)
    changes = plan(app.admin, declared)
    changes_table(f"{title}: plan", changes, done=False, matches=_MATCHES)
    if all(change.kind == "warning" for change in changes):  # nothing to apply
        return
    applying = sum(change.kind != "warning" for change in changes)
    with progress(f"{title}: applying {applying} change(s)") as step:
        results = migrate(app.admin, declared)
        for change in results:
            step(f"{change.symbol} {change.topic}: {change.detail}")
    changes_table(title, results, done=True, matches=_MATCHES)
    if any(change.error or change.kind == "impossible" for change in results):
        sys.exit(1)


def _remove(app: App, title: str) -> None:
    existing = set(app.admin.list_topics())
    names = [name for name in app.web.topics.names if name in existing]
    with progress(title) as step:
        for name in names:
            app.admin.delete_topic(name)
            step(f"deleted {name}")
        group = app.web.topics.group
        try:
            app.admin.delete_consumer_group(group)
            step(f"deleted consumer group {group}")
        except KafkaError as exc:
            step(f"consumer group {group}: {exc.name or exc}")


@web.command("install")
@_app_option
@_replication_option
def install(app_spec: str | None, replication_factor: int | None) -> None:
    """Create the web UI's topics (shows the plan first)."""
    _apply(load_app(app_spec), replication_factor, "Install")


@web.command("migrate")
@_app_option
@_replication_option
def migrate_(app_spec: str | None, replication_factor: int | None) -> None:
    """Bring the web UI's topics to this version's settings (safe to run any time)."""
    _apply(load_app(app_spec), replication_factor, "Migrate")


@web.command("reset")
@_app_option
@_replication_option
@_yes_option
def reset(app_spec: str | None, replication_factor: int | None, yes: bool) -> None:
    """Delete the web UI's topics and its group, and create the topics again, empty."""
    app = load_app(app_spec)
    confirm(
        yes,
        f"Delete {', '.join(app.web.topics.names)} (all reports, states, metrics, errors and commands) and create them again?",
    )
    _remove(app, "Reset: deleting")
    _apply(app, replication_factor, "Reset")


@web.command("uninstall")
@_app_option
@_yes_option
def uninstall(app_spec: str | None, yes: bool) -> None:
    """Delete the web UI's topics and its consumer group."""
    app = load_app(app_spec)
    confirm(
        yes, f"Delete {', '.join(app.web.topics.names)} and consumer group {app.web.topics.group}?"
    )
    _remove(app, "Uninstall")
    console.print("uninstalled", highlight=False)
