"""Terminal output shared by the commands: consoles, progress, key-value tables, errors."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from conveyor.admin import Change

__all__ = [
    "changes_table",
    "confirm",
    "console",
    "error_console",
    "key_value_table",
    "progress",
    "table",
    "warn",
]

console = Console(soft_wrap=True)
error_console = Console(stderr=True, soft_wrap=True)
for _console in (console, error_console):
    if not _console.is_terminal:  # pipes and CI: tables need not fit 80 columns
        _console.width = 160


@contextmanager
def progress(title: str) -> Iterator[Callable[[str], None]]:
    """Report the steps of a long job: a spinner on a terminal, one line per step otherwise.

    Yields the callback that the job calls with each step's description.
    """
    if error_console.is_terminal:
        with error_console.status(title) as status:
            yield lambda message: status.update(f"{title}: {message}")
    else:
        error_console.print(title)
        yield lambda message: error_console.print(f"  {message}", highlight=False)


def key_value_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    """A two-column table for one thing's properties (status pages)."""
    result = Table(title=title, show_header=False, title_justify="left")
    result.add_column("property", style="bold")
    result.add_column("value")
    for key, value in rows:
        result.add_row(key, value)
    return result


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A listing with a header row; numeric-looking columns are right-aligned by the caller's text."""
    result = Table(title=title, title_justify="left")
    for column in columns:
        result.add_column(column)
    for row in rows:
        result.add_row(*row)
    return result


def warn(message: str) -> None:
    """A warning for the operator, on stderr (the command goes on)."""
    error_console.print(f"[yellow]warning:[/] {message}", highlight=False)


def confirm(yes: bool, question: str) -> None:
    """Ask before a destructive step; without a terminal, refuse unless ``--yes`` was given."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(f"{question} Refusing without a terminal: pass --yes.")
    click.confirm(question, abort=True)


_COLOURS = {"+": "green", "~": "yellow", "!": "red", "*": "magenta"}


def changes_table(
    title: str,
    changes: Sequence[Change],
    done: bool,
    matches: str = "the cluster matches the routes",
) -> None:
    """A declarative plan (``done=False``) or its outcome, one row per change."""
    if not changes:
        console.print(f"{title}: nothing to do, {matches}.", highlight=False)
        return
    rows = []
    for change in changes:
        status = (
            "done"
            if change.applied
            else f"failed: {change.error}"
            if change.error
            else "warning"
            if change.kind == "warning"
            else "skipped"
        )
        rows.append(
            (
                f"[{_COLOURS[change.symbol]}]{change.symbol}[/]",
                change.topic,
                change.detail,
                *((status,) if done else ()),
            )
        )
    console.print(table(title, ["", "topic", "change", *(("result",) if done else ())], rows))
