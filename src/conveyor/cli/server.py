"""``conveyor server`` (run an app's consumers) and ``conveyor info`` (show its routes)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from conveyor._version import __version__
from conveyor.cli.ctl import show_processes
from conveyor.cli.loading import app_option, load_app
from conveyor.cli.logs import Say, configure_logging, log_options
from conveyor.cli.output import console, key_value_table, table
from conveyor.driver import client_versions
from conveyor.instrumentation.background_log import BACKGROUND_LOG
from conveyor.masking import mask, shown_setting
from conveyor.swarm.heartbeat import start_heartbeat

if TYPE_CHECKING:
    from conveyor.app import App

__all__ = ["info", "run_until_signalled", "server"]

_app_option = app_option("The app to run, e.g. shop.app:app (default: $CONVEYOR_APP).")


def _names(value: str | None) -> list[str] | None:
    return [name.strip() for name in value.split(",") if name.strip()] if value else None


@click.command()
@_app_option
@click.option("--consumer-groups", help="Only these consumer groups (comma-separated).")
@click.option("--subscription-groups", help="Only these subscription groups (comma-separated).")
@click.option("--topics", help="Only these topics (comma-separated).")
@click.option("--exclude-consumer-groups", help="All consumer groups but these (comma-separated).")
@click.option(
    "--exclude-subscription-groups", help="All subscription groups but these (comma-separated)."
)
@click.option("--exclude-topics", help="All topics but these (comma-separated).")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve Prometheus metrics on this port (GET /metrics; needs conveyor[prometheus]).",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port."
)
@click.option(
    "--liveness-port",
    type=click.IntRange(0, 65535),
    help="Answer GET /healthz on this port: 200 while listeners poll and no batch is stuck.",
)
@click.option(
    "--liveness-host", default="127.0.0.1", show_default=True, help="Address for --liveness-port."
)
@log_options()
def server(
    app_spec: str | None,
    consumer_groups: str | None,
    subscription_groups: str | None,
    topics: str | None,
    exclude_consumer_groups: str | None,
    exclude_subscription_groups: str | None,
    exclude_topics: str | None,
    metrics_port: int | None,
    metrics_host: str,
    liveness_port: int | None,
    liveness_host: str,
    log_level: str,
    log_format: str,
) -> None:
    """Run the app's consumers until SIGINT/SIGTERM (a second one forces); SIGTSTP quiets.

    Exits 0 after a clean stop, 1 after a crash, 2 after a forced stop.
    """
    configure_logging(log_level, log_format)
    say = Say(log_format)
    app = load_app(app_spec)
    active = app.routes.active()
    groups = _narrow(
        _names(consumer_groups), _names(exclude_consumer_groups), {r.consumer_group for r in active}
    )
    subscriptions = _narrow(
        _names(subscription_groups),
        _names(exclude_subscription_groups),
        {r.subscription_group for r in active},
    )
    only_topics = _narrow(_names(topics), _names(exclude_topics), {r.name for r in active})
    routes = [
        route
        for route in active
        if (groups is None or route.consumer_group in groups)
        and (subscriptions is None or route.subscription_group in subscriptions)
        and (only_topics is None or route.name in only_topics)
    ]
    metrics = ""
    if metrics_port is not None:
        port = app.metrics.serve(metrics_port, metrics_host)
        metrics = f"  metrics on http://{metrics_host}:{port}/metrics\n"
    if liveness_port is not None:
        port = app.liveness.serve(liveness_port, liveness_host)
        metrics += f"  liveness on http://{liveness_host}:{port}/healthz\n"
    versions = client_versions()
    say(
        f"[bold]Conveyor {__version__}[/] (confluent-kafka {versions['confluent-kafka']}, librdkafka "
        f"{versions['librdkafka']}) · app {app.settings.client_id} · broker {app.settings.kafka.get('bootstrap.servers')}\n"
        f"  concurrency {app.settings.concurrency} · max_messages {app.settings.max_messages} · "
        f"max_wait_time {app.settings.max_wait_time:g} s · pid {os.getpid()}\n"
        + metrics
        + "\n".join(
            f"  {route.consumer_group} / {route.subscription_group}: {route.name} -> "
            f"{route.consumer_class.__name__ if route.consumer_class else '-'}"
            for route in routes
        ),
        event="server.starting",
        client=app.settings.client_id,
        version=__version__,
        routes=[f"{route.consumer_group}/{route.name}" for route in routes],
    )
    run_until_signalled(app, groups, subscriptions, only_topics, say)


def run_until_signalled(
    app: App,
    groups: list[str] | None = None,
    subscriptions: list[str] | None = None,
    topics: list[str] | None = None,
    say: Say | None = None,
) -> None:
    """Run ``app`` until SIGINT/SIGTERM (a second one forces exit 2); SIGTSTP quiets; exit 1
    after a crash. ``say`` tells the operator what happens (text on stderr by default)."""
    say = say or Say()
    signals = {"count": 0}

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            say("second signal: forcing exit", logging.WARNING, event="server.forced")
            BACKGROUND_LOG.flush(1.0)
            os._exit(2)
        name = signal.Signals(signum).name
        say(f"{name}: stopping gracefully (again to force)", event="server.stopping", signal=name)
        app.stop()

    def on_quiet(_signum: int, _frame: FrameType | None) -> None:
        say(
            "SIGTSTP: quieting (finishing running batches, taking no new ones)",
            event="server.quieting",
        )
        app.quiet()

    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGTSTP, on_quiet)
    start_heartbeat(
        app, app.liveness.check
    )  # a swarm node's beat to its supervisor (nothing otherwise)
    try:
        app.run(consumer_groups=groups, subscription_groups=subscriptions, topics=topics)
    except Exception as exc:
        if app.crash is None:
            raise
        say(f"[bold red]crashed:[/] {escape(str(exc))}", logging.ERROR, event="server.crashed")
        BACKGROUND_LOG.flush(5.0)
        sys.exit(1)
    say("stopped cleanly", event="server.stopped")
    BACKGROUND_LOG.flush(5.0)


def _narrow(
    included: list[str] | None, excluded: list[str] | None, known: set[str]
) -> list[str] | None:
    """The names to keep: the included ones (default all), minus the excluded ones."""
    if excluded is None:
        return included
    return sorted(set(included if included is not None else known) - set(excluded))


@click.command()
@_app_option
@click.option(
    "--processes",
    is_flag=True,
    help="Also list the running processes (a swarm's nodes under their supervisor); "
    "needs app.web.enable().",
)
def info(app_spec: str | None, processes: bool) -> None:
    """Show the app's routes as a table (and with --processes its running processes)."""
    app = load_app(app_spec)
    rows = [
        (
            route.consumer_group,
            route.subscription_group,
            f"{route.name} (pattern)" if route.pattern is not None else route.name,
            route.consumer_class.__name__ if route.consumer_class else "-",
            "yes" if route.active else "no",
            ",".join(map(str, route.assign)) if route.assign else "subscribe",
            str(route.max_messages or app.settings.max_messages),
            route.initial_offset or str(app.settings.kafka.get("auto.offset.reset", "earliest")),
        )
        for route in app.routes
    ]
    console.print(
        table(
            f"Routes of {app.settings.client_id} ({app.settings.kafka.get('bootstrap.servers')})",
            [
                "consumer group",
                "subscription group",
                "topic",
                "consumer",
                "active",
                "partitions",
                "max messages",
                "initial offset",
            ],
            rows,
        )
    )
    console.print(
        key_value_table(
            "Kafka settings (secrets masked)",
            [
                (name, shown_setting(value))
                for name, value in sorted(mask(app.settings.kafka).items())
            ],
        )
    )
    own = [
        (route.name, name, shown_setting(value))
        for route in app.routes
        for name, value in sorted(mask(route.kafka).items())
    ]
    if own:
        console.print(table("Routes' own Kafka settings", ["topic", "setting", "value"], own))
    if processes:
        show_processes(app)
