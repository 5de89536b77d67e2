"""``conveyor dlq replay``: move a dead letter queue's messages back."""

from __future__ import annotations

import click
from rich.progress import Progress

from conveyor.admin.replay import redrive_dead_letters, replay_dead_letters
from conveyor.cli.loading import app_option, load_app
from conveyor.cli.output import console, error_console, table
from conveyor.errors import ConfigurationError
from conveyor.web.reading.dead_letters import parse_refs

__all__ = ["dlq"]


@click.group()
def dlq() -> None:
    """Dead letter queues."""


@dlq.command()
@app_option()
@click.option("--topic", required=True, help="The dead letter queue topic.")
@click.option(
    "--to",
    "target",
    default="original",
    show_default=True,
    help="'original' (each message's original_topic header) or a topic name.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Replay at most this many messages."
)
@click.option(
    "--offset",
    "offsets",
    multiple=True,
    metavar="PARTITION:OFFSET",
    help="Replay only these dead letters (repeatable); the replay progress is left alone.",
)
def replay(
    app_spec: str | None, topic: str, target: str, limit: int | None, offsets: tuple[str, ...]
) -> None:
    """Produce the DLQ's messages again (key, payload, headers as they were) and report counts.

    Without --offset, everything not replayed before (progress is kept in a consumer group);
    with --offset, just those."""
    try:
        selection = parse_refs(list(offsets))
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--offset") from None
    if selection and limit is not None:
        raise click.UsageError("--limit and --offset do not go together")
    app = load_app(app_spec)
    to = None if target == "original" else target
    missing: list[tuple[int, int]] = []
    unroutable: list[tuple[int, int]] = []
    timed_out: list[tuple[int, int]] = []
    with Progress(console=error_console, transient=True) as progress:
        task = progress.add_task(f"replaying {topic}", total=None)

        def step(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        if selection:
            result = redrive_dead_letters(app, topic, selection, to=to, on_progress=step)
            counts = result["counts"]
            missing = result["missing"]
            unroutable, timed_out = result["unroutable"], result["timed_out"]
        else:
            counts = replay_dead_letters(app, topic, to=to, limit=limit, on_progress=step)
    rows = [(name, f"{count:,}") for name, count in sorted(counts.items())]
    console.print(
        table(
            f"Replayed from {topic}: {sum(counts.values()):,} message(s)",
            ["to topic", "messages"],
            rows,
        )
    )
    problems = [
        ("not found (deleted, compacted away or past the end)", missing),
        ("not sent, no original_topic header (give --to)", unroutable),
        ("not reached in time (run again)", timed_out),
    ]
    for what, found in problems:
        if found:
            error_console.print(
                f"{what}: " + ", ".join(f"{p}:{o}" for p, o in found), highlight=False
            )
    if any(found for _, found in problems):
        raise SystemExit(1)
