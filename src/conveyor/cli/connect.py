"""``conveyor connect``: the app's sink routes (``list``), running its broadcast sinks
(``broadcast``), and connect workers configured over Kafka Connect's REST API (``worker``)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import TYPE_CHECKING

import click

from conveyor.app import App
from conveyor.cli.loading import app_option, kafka_without_app, load_app
from conveyor.cli.logs import Say, configure_logging, log_options
from conveyor.cli.output import console, table
from conveyor.cli.server import run_until_signalled
from conveyor.connect.sinks import Broadcast
from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.connect.runtime.rest import Gate

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


@connect.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Serve the REST API here.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8083,
    show_default=True,
    help="The REST API's port (Kafka Connect's default).",
)
@click.option(
    "--group",
    default="conveyor-connect",
    show_default=True,
    help="The connect cluster: workers of one group share connectors and spread their tasks; "
    "its topics are <group>-configs, -status, -offsets and -slots.",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(1),
    default=None,
    help="Replicas of the topics the worker creates (default: the cluster's).",
)
@click.option(
    "--user",
    default="admin",
    show_default=True,
    help="The REST API's user when $CONVEYOR_CONNECT_PASSWORD_HASH is set.",
)
@log_options()
def worker(
    host: str,
    port: int,
    group: str,
    replication_factor: int | None,
    user: str,
    log_level: str,
    log_format: str,
) -> None:
    """Run a connect worker: Kafka Connect's REST API on HOST:PORT, the connectors its
    cluster's config topic holds, the tasks Kafka's group assignment gives it. Kafka from
    $KAFKA_BOOTSTRAP_SERVERS (and $CONVEYOR_KAFKA_*).

    With $CONVEYOR_CONNECT_PASSWORD_HASH (from `conveyor web hash-password`) every call signs
    in with HTTP Basic as USER; without it the API is open to whoever reaches the port."""
    try:
        import uvicorn  # noqa: PLC0415 - the connect extra, needed only to serve
    except ImportError as exc:
        raise ConfigurationError(
            f"conveyor connect worker needs the connect extra: pip install 'conveyor[connect]' "
            f"({exc})",
            "connect",
        ) from exc
    from conveyor.connect.runtime import Worker, WorkerSettings  # noqa: PLC0415
    from conveyor.connect.runtime.rest import create_rest_app  # noqa: PLC0415

    configure_logging(log_level, log_format)
    say = Say(log_format)
    kafka = kafka_without_app()
    if not kafka.get("bootstrap.servers"):
        raise ConfigurationError(
            "set KAFKA_BOOTSTRAP_SERVERS: the Kafka the connect worker runs on", "bootstrap.servers"
        )
    settings = WorkerSettings(
        kafka=kafka, worker_id=f"{host}:{port}", group=group, replication_factor=replication_factor
    )
    gate = _rest_gate(user, host, say)
    stop, asked = threading.Event(), threading.Event()

    def stop_asked(*_: object) -> None:
        asked.set()
        stop.set()

    for signalled in (signal.SIGINT, signal.SIGTERM):  # from now on: even while starting
        signal.signal(signalled, stop_asked)
    running = Worker(settings, make_app=App)
    running.start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_rest_app(running.cluster, gate),
            host=host,
            port=port,
            log_level=log_level.lower(),
            access_log=False,
            log_config=None,
        )
    )
    failed = threading.Event()

    def serve() -> None:
        try:
            server.run()  # off the main thread: the signals above stay this command's
        finally:
            if not server.started and not asked.is_set():
                failed.set()  # it could not listen (uvicorn logged why)
            stop.set()

    if not stop.is_set():
        serving = threading.Thread(target=serve, name="connect-rest", daemon=True)
        serving.start()
        say(
            f"connect worker {settings.worker_id} of {group}: REST API on http://{host}:{port}",
            event="connect.worker.started",
        )
        stop.wait()
        server.should_exit = True
        serving.join(30)
    running.stop()
    say("connect worker stopped", event="connect.worker.stopped")
    if failed.is_set():
        raise click.ClickException(f"the REST API could not listen on {host}:{port}")


def _rest_gate(user: str, host: str, say: Say) -> Gate | None:
    """The REST API's sign-in: HTTP Basic as ``user`` with the password hashed in
    $CONVEYOR_CONNECT_PASSWORD_HASH; none without it (and a warning off loopback)."""
    from conveyor.web.access import BasicLogin  # noqa: PLC0415
    from conveyor.web.connect_api import password_gate  # noqa: PLC0415

    password_hash = os.environ.get("CONVEYOR_CONNECT_PASSWORD_HASH")
    if password_hash:
        try:
            return password_gate(BasicLogin(user, password_hash))
        except ConfigurationError as error:
            raise ConfigurationError(
                f"$CONVEYOR_CONNECT_PASSWORD_HASH: {error.args[0]}",
                "CONVEYOR_CONNECT_PASSWORD_HASH",
            ) from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        say(
            f"[yellow]warning:[/] the REST API on {host} is open to anyone who reaches it: set "
            "$CONVEYOR_CONNECT_PASSWORD_HASH (conveyor web hash-password)",
            logging.WARNING,
            event="connect.open",
        )
    return None
