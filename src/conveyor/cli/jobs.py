"""``conveyor jobs queues | dead | retry | discard``: an app's background job queues and dead
jobs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
from rich.progress import Progress

from conveyor.admin import Admin
from conveyor.admin.replay import redrive_dead_letters, replay_dead_letters
from conveyor.cli.loading import app_option, json_option, load_app
from conveyor.cli.output import confirm, console, error_console, table, warn
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.jobs.dead import discard, discarded, read_dead_job, reviver
from conveyor.web.reading.dead_letters import parse_refs
from conveyor.web.reading.explorer import Explorer
from conveyor.web.reading.explorer_query import Start

__all__ = ["jobs"]

_app_option = app_option("The app whose jobs to look at (default: $CONVEYOR_APP).")


@click.group()
def jobs() -> None:
    """Background jobs: their queues, dead jobs, retrying and discarding them."""


def _queue(app: Any, name: str) -> Any:
    queue = app.jobs.queues.get(name)
    if queue is None:
        known = ", ".join(sorted(app.jobs.queues)) or "none"
        raise ConfigurationError(
            f"the app has no job queue {name!r} (its queues: {known})", "queue"
        )
    return queue


def _messages(admin: Admin, topic: str) -> int:
    try:
        return admin.message_count(topic)
    except ConveyorError:  # not created yet
        return 0


@jobs.command("queues")
@_app_option
@json_option()
def jobs_queues(app_spec: str | None, as_json: bool) -> None:
    """The job queues: their topics, jobs waiting (the group's lag), dead jobs."""
    app = load_app(app_spec)
    admin = app.admin
    group = str(app.settings.kafka.get("group.id") or app.settings.client_id)
    waiting: dict[str, int] = {}
    for lag in admin.read_lags([group]):
        waiting[lag.topic] = waiting.get(lag.topic, 0) + lag.lag
    rows: list[dict[str, Any]] = [
        {
            "queue": queue.name,
            "topic": queue.topic,
            "jobs": sorted(queue.by_name),
            "waiting": waiting.get(queue.topic, _messages(admin, queue.topic)),
            "dead": _messages(admin, queue.dead_topic),
            "dead_topic": queue.dead_topic,
        }
        for queue in app.jobs.queues.values()
    ]
    if as_json:
        click.echo(json.dumps(rows))
        return
    console.print(
        table(
            f"Job queues of {app.settings.client_id}",
            ["queue", "topic", "waiting", "dead", "jobs"],
            [
                (
                    r["queue"],
                    r["topic"],
                    f"{r['waiting']:,}",
                    f"{r['dead']:,}",
                    ", ".join(r["jobs"]),
                )
                for r in rows
            ],
        )
    )


@jobs.command("dead")
@_app_option
@json_option()
@click.argument("queue")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="The newest dead jobs to show (per partition at most).",
)
@click.option("--with-discarded", is_flag=True, help="Show the discarded ones too.")
def jobs_dead(
    app_spec: str | None, as_json: bool, queue: str, limit: int, with_discarded: bool
) -> None:
    """The newest dead jobs of QUEUE: which job, its arguments, attempts and last error."""
    app = load_app(app_spec)
    target = _queue(app, queue)
    raws, _complete = Explorer(app.settings.kafka).scan(
        target.dead_topic, Start("newest", limit), limit * 10
    )
    gone = set() if with_discarded else discarded(app.settings.kafka, target)
    dead = sorted(
        (read_dead_job(raw) for raw in raws if (raw.partition(), raw.offset()) not in gone),
        key=lambda d: (d.timestamp or 0, d.partition, d.offset),
    )
    if as_json:
        click.echo(json.dumps([d.to_dict() for d in dead], default=str))
        return
    console.print(
        table(
            f"Dead jobs of {queue} ({target.dead_topic}): {len(dead):,}",
            ["ref", "when", "job", "arguments", "attempts", "error"],
            [
                (
                    d.ref,
                    _when(d.timestamp),
                    d.job,
                    _arguments(d.args, d.kwargs),
                    "" if d.attempts is None else str(d.attempts),
                    f"{d.error_class}: {d.error_message}"[:200],
                )
                for d in dead
            ],
        )
    )


def _when(stamp: float | None) -> str:
    return (
        "" if stamp is None else datetime.fromtimestamp(stamp, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    )


def _arguments(args: list[Any], kwargs: dict[str, Any]) -> str:
    text = ", ".join(
        [
            *(json.dumps(a, default=str) for a in args),
            *(f"{k}={json.dumps(v, default=str)}" for k, v in kwargs.items()),
        ]
    )
    return text if len(text) <= 80 else text[:79] + "…"


@jobs.command("retry")
@_app_option
@click.argument("queue")
@click.option(
    "--ref",
    "refs",
    multiple=True,
    metavar="PARTITION:OFFSET",
    help="Retry these dead jobs (repeatable; see conveyor jobs dead).",
)
@click.option(
    "--all", "everything", is_flag=True, help="Retry every dead job not retried with --all before."
)
def jobs_retry(app_spec: str | None, queue: str, refs: tuple[str, ...], everything: bool) -> None:
    """Send dead jobs of QUEUE back to it, their attempts counted from 1 again."""
    if bool(refs) == everything:
        raise click.UsageError("give --ref PARTITION:OFFSET (one or more) or --all")
    try:
        selection = parse_refs(list(refs))
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--ref") from None
    app = load_app(app_spec)
    target = _queue(app, queue)
    with Progress(console=error_console, transient=True) as progress:
        task = progress.add_task(f"retrying dead jobs of {queue}", total=None)

        def step(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        revive = reviver(discarded(app.settings.kafka, target))  # the discarded stay dead
        if everything:
            counts = replay_dead_letters(
                app, target.dead_topic, to=target.topic, on_progress=step, restore=revive
            )
            missing: list[tuple[int, int]] = []
        else:
            result = redrive_dead_letters(
                app, target.dead_topic, selection, to=target.topic, on_progress=step, restore=revive
            )
            counts, missing = result["counts"], result["missing"] + result["timed_out"]
    console.print(f"sent {sum(counts.values()):,} dead job(s) back to {target.topic}")
    if missing:
        console.print(f"not found: {', '.join(f'{p}:{o}' for p, o in missing)}")
        raise SystemExit(1)


@jobs.command("discard")
@_app_option
@click.argument("queue")
@click.option(
    "--ref",
    "refs",
    multiple=True,
    metavar="PARTITION:OFFSET",
    help="Discard these dead jobs (repeatable; see conveyor jobs dead).",
)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Discard every dead job of the queue not discarded yet.",
)
@click.option("--yes", is_flag=True, help="With --all: do not ask for confirmation.")
def jobs_discard(
    app_spec: str | None, queue: str, refs: tuple[str, ...], everything: bool, yes: bool
) -> None:
    """Discard dead jobs of QUEUE: no longer listed, never sent back (the dead-job topic keeps
    them; the discarding is noted in a compacted topic beside it)."""
    if bool(refs) == everything:
        raise click.UsageError("give --ref PARTITION:OFFSET (one or more) or --all")
    try:
        selection = parse_refs(list(refs))
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--ref") from None
    app = load_app(app_spec)
    target = _queue(app, queue)
    if everything:
        selection = _all_dead(app, target)
        if not selection:
            console.print(f"no dead job of {queue} to discard")
            return
        confirm(yes, f"Discard {len(selection):,} dead job(s) of {queue} ({target.dead_topic})?")
    with Progress(console=error_console, transient=True) as progress:
        task = progress.add_task(f"discarding dead jobs of {queue}", total=len(selection))
        noted = 0
        for start in range(0, len(selection), _DISCARD_CHUNK):
            noted += discard(app.producer, target, selection[start : start + _DISCARD_CHUNK])
            progress.update(task, completed=noted)
    console.print(f"discarded {noted:,} dead job(s) of {queue}")


_DISCARD_CHUNK = 1_000
_ALL_DEAD, _ALL_SECONDS = 1_000_000, 120.0  # the most dead jobs one --all reads, and how long


def _all_dead(app: Any, target: Any) -> list[tuple[int, int]]:
    """The refs of every dead job of the queue not discarded yet (the whole dead-job topic,
    read from its start)."""
    with Progress(console=error_console, transient=True) as progress:
        progress.add_task(f"reading the dead jobs of {target.name}", total=None)
        try:
            raws, complete = Explorer(app.settings.kafka, timeout=_ALL_SECONDS).scan(
                target.dead_topic, Start("offset", 0), _ALL_DEAD
            )
        except ConfigurationError:  # not created yet: no dead job
            return []
        gone = discarded(app.settings.kafka, target)
    if not complete:
        warn(
            f"read the first {len(raws):,} dead jobs of {target.name} only (one run reads "
            f"{_ALL_DEAD:,} at most, for {_ALL_SECONDS:g} s at most): the others stay listed"
        )
    return sorted({(raw.partition(), raw.offset()) for raw in raws} - gone)
