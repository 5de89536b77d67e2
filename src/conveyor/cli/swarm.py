"""``conveyor swarm``: run N ``conveyor server`` nodes of one app under a supervisor."""

from __future__ import annotations

import os
import re
import sys

import click
from rich.markup import escape

from conveyor.cli.loading import app_option, load_app
from conveyor.cli.logs import Say, configure_logging, log_options
from conveyor.swarm import Supervisor

__all__ = ["swarm"]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgKMG]?)i?[bB]?\s*$")


class _Nodes(click.ParamType[int]):
    name = "nodes"

    def convert(self, value: object, param: object, ctx: object) -> int:
        if isinstance(value, int):
            count = value
        elif str(value).strip().lower() == "auto":
            count = os.cpu_count() or 1
        else:
            try:
                count = int(str(value))
            except ValueError:
                self.fail(f"{value!r} is not a number of nodes (or auto)")
        if count < 1:
            self.fail(f"a swarm needs at least one node, not {count}")
        return count


class _Bytes(click.ParamType[int]):
    name = "size"

    def convert(self, value: object, param: object, ctx: object) -> int:
        if isinstance(value, int):
            return value
        match = _SIZE.match(str(value))
        if match is None:
            self.fail(f"{value!r} is not a size (like 512MB or 2GB)")
        number, unit = float(match.group(1)), match.group(2).lower()
        size = int(number * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit])
        if size < 1 << 20:
            self.fail(f"{value!r} is less than a megabyte")
        return size


@click.command()
@app_option("The app to run, e.g. shop.app:app (default: $CONVEYOR_APP).")
@click.option(
    "--nodes",
    type=_Nodes(),
    default="auto",
    show_default=True,
    help="How many server processes (auto: one per core).",
)
@click.option(
    "--liveness",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds without a heartbeat after which a node is replaced.",
)
@click.option(
    "--memory-limit",
    type=_Bytes(),
    default=None,
    help="A node using more memory than this (like 1GB) is replaced.",
)
@click.option(
    "--max-restarts",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Replacements allowed in a minute before the swarm gives up.",
)
@log_options()
def swarm(
    app_spec: str | None,
    nodes: int,
    liveness: float,
    memory_limit: int | None,
    max_restarts: int,
    log_level: str,
    log_format: str,
) -> None:
    """Run NODES copies of `conveyor server` in one consumer group, and keep them running.

    SIGTERM/SIGINT stop every node gracefully (a second one kills them), SIGTSTP quiets them.
    Exits 0 after a clean stop, 1 when nodes kept dying, 2 when forced."""
    configure_logging(log_level, log_format)
    say = Say(log_format)
    app = load_app(app_spec)  # loaded here only to refuse a bad app before any node starts
    spec = app_spec or os.environ.get("CONVEYOR_APP", "")
    command = [
        sys.executable,
        "-m",
        "conveyor",
        "server",
        "--app",
        spec,
        "--log-level",
        log_level,
        "--log-format",
        log_format,
    ]
    say(
        f"[bold]Conveyor swarm[/] of {app.settings.client_id}: {nodes} node(s) "
        f"(pid {os.getpid()}; liveness {liveness:g} s"
        + (f", memory limit {memory_limit >> 20} MiB" if memory_limit else "")
        + ")",
        event="swarm.starting",
        client=app.settings.client_id,
        nodes=nodes,
    )
    supervisor = Supervisor(
        command,
        nodes,
        liveness=liveness,
        memory_limit=memory_limit,
        max_restarts=max_restarts,
        shutdown_timeout=app.settings.shutdown_timeout + 10,
        say=lambda line: say(escape(line), event="swarm"),
    )
    raise SystemExit(supervisor.run())
