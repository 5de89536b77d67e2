"""``conveyor bench``: run the benchmark scripts of a checkout's ``bench/`` folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from conveyor.cli.output import console, error_console, table
from conveyor.errors import ConveyorError

__all__ = ["bench"]

_HELPERS = frozenset({"harness", "baselines"})  # modules the scripts import, not benchmarks


def _scripts(folder: Path) -> dict[str, Path]:
    return {
        path.stem: path
        for path in sorted(folder.glob("*.py"))
        if not path.name.startswith("_") and path.stem not in _HELPERS
    }


@click.command()
@click.argument("names", nargs=-1)
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench"),
    show_default=True,
    help="Folder holding the benchmark scripts.",
)
@click.option("--list", "list_only", is_flag=True, help="List the benchmarks and exit.")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=None,
    help="Runs per variant (each script's default otherwise).",
)
@click.option(
    "--warm-up",
    "warm_up",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds of traffic through the broker first (the folder's _warm_up.py), so that "
    "the first runs do not measure a broker whose JVM has not compiled its paths yet; 0 skips.",
)
def bench(
    names: tuple[str, ...], folder: Path, list_only: bool, repeats: int | None, warm_up: float
) -> None:
    """Run benchmarks (all, or NAMES) against $KAFKA_BOOTSTRAP_SERVERS or 127.0.0.1:9092.

    Each prints a table and one JSON line per figure with its ratio against a bare
    confluent-kafka loop measured in the same run. The broker is warmed up first.
    """
    available = _scripts(folder)
    if not available:
        raise ConveyorError(
            f"No benchmark scripts in {folder.resolve()}. Run `conveyor bench` from a Conveyor "
            "checkout, or point at the folder with --dir."
        )
    if list_only:
        console.print(
            table(
                "Benchmarks",
                ["name", "script"],
                [(name, str(path)) for name, path in available.items()],
            )
        )
        return
    unknown = [name for name in names if name not in available]
    if unknown:
        raise ConveyorError(
            f"Unknown benchmark {', '.join(unknown)}; known: {', '.join(available)}."
        )
    warm_up_script = folder / "_warm_up.py"
    if warm_up and warm_up_script.exists():
        command = [sys.executable, str(warm_up_script), "--seconds", str(warm_up)]
        if subprocess.call(command) != 0:
            raise ConveyorError("Warming the broker up failed (its output is above).")
    failures = 0
    for name in names or tuple(available):
        error_console.print(f"[bold]bench {name}[/]")
        command = [sys.executable, str(available[name])]
        if repeats is not None:
            command += ["--repeats", str(repeats)]
        failures += subprocess.call(command) != 0
    if failures:
        raise ConveyorError(f"{failures} benchmark(s) failed; their output is above.")
