"""``conveyor dlq replay``: move a dead letter queue's messages back."""

from __future__ import annotations

import click
from rich.progress import Progress

from conveyor.admin.replay import replay_dead_letters
from conveyor.cli.loading import load_app
from conveyor.cli.output import console, error_console, table

__all__ = ["dlq"]


@click.group()
def dlq() -> None:
    """Dead letter queues."""


@dlq.command()
@click.option(
    "--app",
    "app_spec",
    envvar="CONVEYOR_APP",
    metavar="MODULE:ATTR",
    help="The app (default: $CONVEYOR_APP).",
)
@click.option("--topic", required=True, help="The dead letter queue topic.")
@click.option("--to", "target", default="original", show_default=True,
              help="'original' (each message's original_topic header) or a topic name.")  # fmt: skip
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Replay at most this many messages."
)
def replay(app_spec: str | None, topic: str, target: str, limit: int | None) -> None:
    """Produce the DLQ's messages again (key, payload, headers as they were) and report counts."""
    app = load_app(app_spec)
    with Progress(console=error_console, transient=True) as progress:
        task = progress.add_task(f"replaying {topic}", total=None)
        counts = replay_dead_letters(
            app, topic, to=None if target == "original" else target, limit=limit,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )  # fmt: skip
    rows = [(name, f"{count:,}") for name, count in sorted(counts.items())]
    console.print(
        table(
            f"Replayed from {topic}: {sum(counts.values()):,} message(s)",
            ["to topic", "messages"],
            rows,
        )
    )
