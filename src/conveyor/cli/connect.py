"""``conveyor connect``: the app's sink routes (``list``) and running its broadcast sinks
(``broadcast``)."""

from __future__ import annotations

import click

from conveyor.cli.loading import app_option, load_app
from conveyor.cli.logs import Say, configure_logging, log_options
from conveyor.cli.output import console, table
from conveyor.cli.server import run_until_signalled
from conveyor.connect.sinks import Broadcast

__all__ = ["connect"]

_app_option = app_option("The app whose sinks to run, e.g. shop.app:app (default: $CONVEYOR_APP).")


@click.group()
def connect() -> None:
    """Sink connectors: push topics into other systems."""


@connect.command("list")
@_app_option
def list_sinks(app_spec: str | None) -> None:
    """The app's sink routes as a table."""
    app = load_app(app_spec)
    rows = []
    for binding in app.routes.sinks:
        [route] = [r for r in app.routes.find(binding.topic) if r.virtual_partitions is not None][
            :1
        ]
        lanes = route.virtual_partitions.max_partitions if route.virtual_partitions else 1
        dlq = route.dead_letter_queue
        rows.append(
            (
                binding.topic,
                type(binding.sink).__name__,
                str(lanes or app.settings.concurrency),
                str(route.max_messages),
                "async" if binding.asynchronous else "sync",
                dlq.topic if dlq is not None and dlq.topic else "-",
            )
        )
    console.print(
        table(
            f"Sinks of {app.settings.client_id}",
            ["topic", "sink", "lanes", "max batch", "kind", "dead letter queue"],
            rows,
        )
    )


@connect.command()
@_app_option
@click.option("--port", type=click.IntRange(0, 65535), help="Listen here (one broadcast sink).")
@log_options()
def broadcast(app_spec: str | None, port: int | None, log_level: str, log_format: str) -> None:
    """Run the app's Broadcast sinks (WebSocket /ws and SSE /sse) until SIGINT/SIGTERM."""
    configure_logging(log_level, log_format)
    say = Say(log_format)
    app = load_app(app_spec)
    bindings = [b for b in app.routes.sinks if isinstance(b.sink, Broadcast)]
    if not bindings:
        raise click.ClickException("the app routes no topic to a Broadcast sink")
    if port is not None:
        if len(bindings) > 1:
            raise click.ClickException("--port needs exactly one Broadcast sink")
        bindings[0].sink.port = port
    topics = sorted({binding.topic for binding in bindings})
    say(
        "\n".join(
            f"broadcasting {binding.topic} on ws://{binding.sink.host}:{binding.sink.port}/ws "
            f"and http://{binding.sink.host}:{binding.sink.port}/sse"
            for binding in bindings
        ),
        event="broadcast.starting",
    )
    run_until_signalled(app, topics=topics, say=say)
