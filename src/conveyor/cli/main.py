"""The ``conveyor`` click group and the error boundary of every command."""

from __future__ import annotations

from typing import Any

import click

from conveyor._version import __version__
from conveyor.cli.acls import acls
from conveyor.cli.admin import cluster, configs, groups, topics
from conveyor.cli.asyncapi import asyncapi
from conveyor.cli.bench import bench
from conveyor.cli.broker import broker
from conveyor.cli.config import config
from conveyor.cli.connect import connect
from conveyor.cli.ctl import ctl
from conveyor.cli.dlq import dlq
from conveyor.cli.jobs import jobs
from conveyor.cli.output import error_console
from conveyor.cli.schemas import schemas
from conveyor.cli.server import info, server
from conveyor.cli.state import state
from conveyor.cli.swarm import swarm
from conveyor.cli.web import web
from conveyor.errors import ConveyorError

__all__ = ["cli", "main"]


class _ConveyorGroup(click.Group):
    """Turns a :class:`ConveyorError` into a one-paragraph message and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConveyorError as exc:
            error_console.print(f"[bold red]error:[/] {exc}", highlight=False)
            ctx.exit(1)


@click.group(cls=_ConveyorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="conveyor")
def cli() -> None:
    """Conveyor: a Kafka processing framework for Python."""


cli.add_command(broker)
cli.add_command(bench)
cli.add_command(server)
cli.add_command(swarm)
cli.add_command(info)
cli.add_command(config)
cli.add_command(web)
cli.add_command(connect)
cli.add_command(ctl)
cli.add_command(asyncapi)
cli.add_command(schemas)
cli.add_command(jobs)
cli.add_command(state)
for _group in (topics, groups, configs, cluster, dlq, acls):
    cli.add_command(_group)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="conveyor")
