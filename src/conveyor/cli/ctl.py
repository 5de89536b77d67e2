"""``conveyor ctl``: commands to running processes (those with ``app.web.enable()``) over the
web UI's commands topic — quiet, stop, probe, and per partition pause, resume and seek; quiet
and stop also to every process at once (``--all``) or to every process of a consumer group
(``--group``)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from conveyor.cli.loading import app_option, load_app
from conveyor.cli.output import confirm, console, error_console, key_value_table, table
from conveyor.web.aggregation.fold import process_status
from conveyor.web.commands import CommandResult, FleetResult, fleet_members, fleet_scope

if TYPE_CHECKING:
    from conveyor.app import App

__all__ = ["ctl"]

_app_option = app_option(
    "The app whose kafka settings and web topics to use (default: $CONVEYOR_APP)."
)
_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the process's answer (for each process's, with --all or --group).",
)
_process_option = click.option(
    "--process",
    "process",
    default=None,
    metavar="ID",
    help="The process (see `conveyor ctl list`); default: whichever has the partition.",
)
_group_option = click.option(
    "--group",
    "group",
    default=None,
    metavar="GROUP",
    help="The consumer group, when more than one reads the topic (default: every owner acts).",
)

_every_option = click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every process that reports to the app's web UI (instead of PROCESS).",
)
_fleet_group_option = click.option(
    "--group",
    "fleet_group",
    default=None,
    metavar="GROUP",
    help="Every process with a listener in this consumer group (instead of PROCESS).",
)
_yes_option = click.option(
    "--yes", is_flag=True, help="With --all or --group: do not ask for confirmation."
)


class _Time(click.ParamType[datetime]):
    """An ISO 8601 time with a time zone (``2026-11-24T10:00:00+00:00``)."""

    name = "time"

    def convert(self, value: Any, param: Any, ctx: Any) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time (like 2026-11-24T10:00:00+00:00)")
        if parsed.tzinfo is None:
            self.fail(f"{value!r} needs a time zone (like +00:00)")
        return parsed


TIME = _Time()


@click.group()
def ctl() -> None:
    """Commands to running processes (their app must call app.web.enable())."""


@ctl.command("list")
@_app_option
def list_processes(app_spec: str | None) -> None:
    """The processes the web UI knows, with their state and partitions."""
    show_processes(load_app(app_spec))


def show_processes(app: App) -> None:
    """Print the processes that report to ``app``'s web topics as a table, a swarm's nodes
    together under their supervisor."""
    data = app.web.data
    try:
        with console.status("reading the processes' reports"):
            data.wait_ready(30)
            states = data.states()
    finally:
        data.stop()
    now = time.time()

    def order(item: tuple[str, dict[str, Any]]) -> tuple[str, int, int, str]:
        state = item[1]
        return (
            str(state.get("hostname") or ""),
            int(state.get("swarm_supervisor") or 0),
            int(state.get("swarm_node") or 0),
            item[0],
        )

    rows = []
    for process_id, state in sorted(states.items(), key=order):
        partitions = ", ".join(
            f"{entry['topic']}/{entry['partition']}" for entry in state.get("partitions", [])
        )
        node, supervisor = state.get("swarm_node"), state.get("swarm_supervisor")
        reported = state.get("reported_at")
        rows.append(
            (
                process_id,
                str(state.get("client_id", "")),
                f"{state.get('hostname', '?')} / {state.get('pid', '?')}",
                f"supervisor {supervisor} · node {node}" if node is not None else "-",
                process_status(state, now),
                f"{now - float(reported):.0f} s ago" if reported else "-",
                partitions or "-",
            )
        )
    console.print(
        table(
            f"{len(rows)} process(es)",
            ["process", "client", "host / pid", "swarm", "state", "last report", "partitions"],
            rows,
        )
    )


def _send(app_spec: str | None, command: str, timeout: float, **arguments: Any) -> None:
    app = load_app(app_spec)
    try:
        with console.status(f"{command}: waiting for the answer (up to {timeout:g} s)"):
            result = app.web.commander().send(command, timeout=timeout, **arguments)
    finally:
        app.producer.close(5)
    _show(result)
    if not result.done:
        raise SystemExit(1)


def _show(result: CommandResult) -> None:
    rows = [
        ("command", result.command),
        ("process", result.process or "-"),
        ("status", result.status),
    ]
    if result.reason:
        rows.append(("reason", result.reason))
    for name, value in result.result.items():
        if name != "threads":
            rows.append((name, "-" if value is None else str(value)))
    out = console if result.done else error_console
    out.print(key_value_table(f"{result.command}: {result.status}", rows))
    threads = result.result.get("threads")
    if threads:
        for thread in threads:
            flags = " (daemon)" if thread.get("daemon") else ""
            console.print(f"[bold]{thread['name']}[/]{flags}", highlight=False)
            console.print(
                thread.get("stack") or "  (no Python frames)", highlight=False, markup=False
            )


def _send_process_or_all(
    app_spec: str | None,
    command: str,
    timeout: float,
    process: str | None,
    every: bool,
    group: str | None,
    yes: bool,
) -> None:
    """``command`` to PROCESS, or to every process (of ``group``) with ``--all``/``--group``."""
    if process is not None and (every or group is not None):
        raise click.UsageError("give PROCESS, or --all / --group, not both")
    if process is not None:
        _send(app_spec, command, timeout, process=process)
        return
    if not every and group is None:
        raise click.UsageError(
            "give PROCESS (see `conveyor ctl list`), --all (every process) or --group GROUP"
        )
    app = load_app(app_spec)
    data = app.web.data
    try:
        with console.status("reading the processes' reports"):
            data.wait_ready(30)
            expected = fleet_members(data.states(), time.time(), group)
        running = (
            f"{len(expected)} running: {', '.join(expected)}"
            if expected
            else "none reported running"
        )
        confirm(yes, f"{command.capitalize()} {fleet_scope(group)} ({running})?")
        with console.status(f"{command}: waiting for the answers (up to {timeout:g} s)"):
            result = app.web.commander().send_all(
                command, group=group, expected=expected, timeout=timeout
            )
    finally:
        data.stop()
        app.producer.close(5)
    _show_fleet(result)
    if not result.done:
        raise SystemExit(1)


def _show_fleet(result: FleetResult) -> None:
    answered = sum(1 for one in result.results if one.done)
    rows = [
        (str(one.process), one.status, one.reason or str(one.result.get("state", "")))
        for one in result.results
    ]
    if not rows:
        rows = [
            ("-", "timed out", "no process answered (is any running, with the web UI enabled?)")
        ]
    out = console if result.done else error_console
    out.print(
        table(
            f"{result.command} to {result.scope}: {answered} of {len(result.results)} done",
            ["process", "status", "state / reason"],
            rows,
        )
    )


_FLEET_HELP = (
    " With --all: every process that reports to the app's web UI; with --group G: every"
    " process with a listener in consumer group G (the whole process, its other groups too)."
    " One command that each process carries out; each one's answer is listed, and one that the"
    " reports show running but that does not answer in time, as timed out. Asks first (--yes"
    " does not)."
)


@ctl.command(help="Finish what runs, take no new batches, stay in the groups." + _FLEET_HELP)
@click.argument("process", required=False)
@_every_option
@_fleet_group_option
@_yes_option
@_app_option
@_timeout_option
def quiet(
    process: str | None,
    every: bool,
    fleet_group: str | None,
    yes: bool,
    app_spec: str | None,
    timeout: float,
) -> None:
    _send_process_or_all(app_spec, "quiet", timeout, process, every, fleet_group, yes)


@ctl.command(help="Stop the process gracefully (as SIGTERM does)." + _FLEET_HELP)
@click.argument("process", required=False)
@_every_option
@_fleet_group_option
@_yes_option
@_app_option
@_timeout_option
def stop(
    process: str | None,
    every: bool,
    fleet_group: str | None,
    yes: bool,
    app_spec: str | None,
    timeout: float,
) -> None:
    _send_process_or_all(app_spec, "stop", timeout, process, every, fleet_group, yes)


@ctl.command()
@click.argument("process")
@_app_option
@_timeout_option
def probe(process: str, app_spec: str | None, timeout: float) -> None:
    """Print the stack of every thread of the process."""
    _send(app_spec, "probe", timeout, process=process)


@ctl.command()
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0))
@click.option("--until", type=TIME, default=None, help="Resume by itself at this time.")
@_process_option
@_group_option
@_app_option
@_timeout_option
def pause(
    topic: str,
    partition: int,
    until: datetime | None,
    process: str | None,
    group: str | None,
    app_spec: str | None,
    timeout: float,
) -> None:
    """Stop processing a partition (it stays assigned) until --until or `ctl resume`."""
    _send(
        app_spec,
        "pause",
        timeout,
        process=process,
        topic=topic,
        partition=partition,
        until=until,
        group=group,
    )


@ctl.command()
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0))
@_process_option
@_group_option
@_app_option
@_timeout_option
def resume(
    topic: str,
    partition: int,
    process: str | None,
    group: str | None,
    app_spec: str | None,
    timeout: float,
) -> None:
    """Resume a paused partition."""
    _send(
        app_spec,
        "resume",
        timeout,
        process=process,
        topic=topic,
        partition=partition,
        group=group,
    )


@ctl.command()
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0))
@click.option("--offset", type=click.IntRange(min=0), default=None, help="Go on from this offset.")
@click.option(
    "--time",
    "when",
    type=TIME,
    default=None,
    help="Go on from the first message at or after this time.",
)
@_process_option
@_group_option
@_app_option
@_timeout_option
def seek(
    topic: str,
    partition: int,
    offset: int | None,
    when: datetime | None,
    process: str | None,
    group: str | None,
    app_spec: str | None,
    timeout: float,
) -> None:
    """Continue a partition from an offset or a time (the owning process seeks: the group
    stays active)."""
    if (offset is None) == (when is None):
        raise click.UsageError("give --offset or --time (one of them)")
    _send(
        app_spec,
        "seek",
        timeout,
        process=process,
        topic=topic,
        partition=partition,
        offset=offset,
        time=when,
        group=group,
    )


@ctl.command()
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0))
@click.option("--store", default=None, help="Rebuild this store only (default: all of them).")
@_process_option
@_group_option
@_app_option
@_timeout_option
def rebuild(
    topic: str,
    partition: int,
    store: str | None,
    process: str | None,
    group: str | None,
    app_spec: str | None,
    timeout: float,
) -> None:
    """Rebuild a partition's state stores from their changelogs in the process that has it
    (its local copy deleted and restored; the partition's batches wait meanwhile)."""
    _send(
        app_spec,
        "rebuild",
        timeout,
        process=process,
        topic=topic,
        partition=partition,
        store=store,
        group=group,
    )
