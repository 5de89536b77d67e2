"""``conveyor broker``: start, stop, inspect and use the development Kafka broker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from conveyor.broker import KAFKA_VERSION, DevelopmentBroker, ensure_kafka_jars
from conveyor.broker.process import DEFAULT_HEAP, DEFAULT_PORT, BrokerStatus
from conveyor.cli.output import console, error_console, key_value_table, progress
from conveyor.errors import BrokerNotRunningError

__all__ = ["broker"]

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"

_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The broker's folder (default: $CONVEYOR_BROKER_DIR or ~/.local/share/conveyor/broker).",
)
_port_option = click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port of the PLAINTEXT listener on 127.0.0.1.",
)
_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds to wait for the broker to answer (the first start also downloads its jars).",
)


@click.group()
def broker() -> None:
    """The development broker: a real Apache Kafka (KRaft) in a background JVM."""


@broker.command()
@_port_option
@_data_dir_option
@_timeout_option
@click.option("--heap", default=DEFAULT_HEAP, show_default=True, help="Maximum JVM heap (-Xmx).")
def start(port: int, data_dir: Path | None, timeout: float, heap: str) -> None:
    """Start the broker (fetching Kafka with Maven the first time) and wait until it answers."""
    development_broker = DevelopmentBroker(data_dir, port=port, heap=heap)
    with progress(f"Kafka {KAFKA_VERSION} development broker") as report:
        outcome = development_broker.start(timeout=timeout, on_progress=report)
    status = outcome.status
    if outcome.already_running:
        note = "" if status.port == port else f" (not on {port}: stop it first to change the port)"
        console.print(
            f"The development broker is already running at {status.bootstrap_servers}{note} "
            f"(pid {status.pid}, data in {status.data_dir}).",
            highlight=False,
        )
    else:
        console.print(
            f"Kafka {status.version} is ready at [bold]{status.bootstrap_servers}[/] "
            f"(pid {status.pid}, data in {status.data_dir}).",
            highlight=False,
        )
    console.print(f"export {BOOTSTRAP_ENV}={status.bootstrap_servers}", highlight=False)


@broker.command()
@_data_dir_option
@click.option("--wipe", is_flag=True, help="Also delete the data folder (all topics).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for a graceful exit before killing the JVM.",
)
def stop(data_dir: Path | None, wipe: bool, timeout: float) -> None:
    """Stop the broker and wait for it to exit; data stays unless --wipe."""
    development_broker = DevelopmentBroker(data_dir)
    with progress("Stopping the development broker"):
        stopped = development_broker.stop(timeout=timeout, wipe=wipe)
    if stopped is None:
        console.print("The development broker is not running.", highlight=False)
    else:
        console.print(
            f"Stopped the broker at {stopped.bootstrap_servers} (pid {stopped.pid}).",
            highlight=False,
        )
    if wipe:
        console.print(f"Deleted {development_broker.data_dir}.", highlight=False)


@broker.command()
@_data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def status(data_dir: Path | None, as_json: bool) -> None:
    """Show address, pid, version, data folder and uptime (exit code 3 when not running)."""
    development_broker = DevelopmentBroker(data_dir)
    current = development_broker.status()
    if current is None:
        if as_json:
            click.echo(json.dumps({"running": False, "data_dir": str(development_broker.data_dir)}))
        else:
            console.print(
                f"The development broker is not running (data folder "
                f"{development_broker.data_dir}).",
                highlight=False,
            )
        sys.exit(3)
    metadata = development_broker.metadata()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "running": True,
                    "bootstrap_servers": current.bootstrap_servers,
                    "pid": current.pid,
                    "version": current.version,
                    "data_dir": current.data_dir,
                    "uptime_seconds": round(current.uptime, 1),
                    "answering": metadata is not None,
                    "cluster_id": metadata.cluster_id if metadata else None,
                }
            )
        )
        return
    console.print(
        key_value_table(
            "Development broker",
            [
                ("address", current.bootstrap_servers),
                (
                    "state",
                    "[green]answering[/]" if metadata else "[yellow]running, not answering yet[/]",
                ),
                ("pid", str(current.pid)),
                ("version", f"Apache Kafka {current.version} (KRaft)"),
                ("cluster id", (metadata.cluster_id or "-") if metadata else "-"),
                ("data folder", current.data_dir),
                ("uptime", _duration(current.uptime)),
            ],
        )
    )


@broker.command()
@_data_dir_option
@click.option("-n", "--lines", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (like tail -F).")
def logs(data_dir: Path | None, lines: int, follow: bool) -> None:
    """Print the end of the broker's log."""
    development_broker = DevelopmentBroker(data_dir)
    log = development_broker.layout.server_log
    if not log.exists():
        raise BrokerNotRunningError(
            f"There is no broker log at {log}: the broker in this data folder never started. "
            "Start it with `conveyor broker start`."
        )
    tail = shutil.which("tail")
    if follow and tail:
        os.execv(tail, [tail, "-n", str(lines), "-F", str(log)])
    for line in log.read_text(errors="replace").splitlines()[-lines:]:
        click.echo(line)


@broker.command()
def fetch() -> None:
    """Download Kafka's jars with Maven into the cache (start does this when needed)."""
    with progress(f"Fetching Apache Kafka {KAFKA_VERSION}") as report:
        libs = ensure_kafka_jars(report)
    console.print(f"Apache Kafka {KAFKA_VERSION} jars are in {libs}.", highlight=False)


@broker.command(name="exec", context_settings={"ignore_unknown_options": True})
@_port_option
@_data_dir_option
@_timeout_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(port: int, data_dir: Path | None, timeout: float, command: tuple[str, ...]) -> None:
    """Run COMMAND with a broker, and stop the broker afterwards if this started it.

    When $KAFKA_BOOTSTRAP_SERVERS is set, COMMAND runs against that Kafka and no broker is
    started. Otherwise the development broker is started (or a running one reused) and its
    address is exported to COMMAND as $KAFKA_BOOTSTRAP_SERVERS. Exits with COMMAND's code.
    Example: conveyor broker exec -- pytest tests/
    """
    environment = dict(os.environ)
    development_broker: DevelopmentBroker | None = None
    started: BrokerStatus | None = None
    if environment.get(BOOTSTRAP_ENV):
        error_console.print(
            f"Using the Kafka at {BOOTSTRAP_ENV}={environment[BOOTSTRAP_ENV]}.", highlight=False
        )
    else:
        development_broker = DevelopmentBroker(data_dir, port=port)
        with progress(f"Kafka {KAFKA_VERSION} development broker") as report:
            outcome = development_broker.start(timeout=timeout, on_progress=report)
        if not outcome.already_running:
            started = outcome.status
        verb = "Reusing the running" if outcome.already_running else "Started the"
        error_console.print(
            f"{verb} development broker at {outcome.status.bootstrap_servers}.", highlight=False
        )
        environment[BOOTSTRAP_ENV] = outcome.status.bootstrap_servers
    try:
        code = subprocess.call(list(command), env=environment)
    finally:
        if development_broker is not None and started is not None:
            with progress("Stopping the development broker this command started"):
                development_broker.stop()
    sys.exit(code)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"
