"""`conveyor bench --list` lists the benchmark scripts, not the modules they import."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from conveyor.cli.main import cli

BENCH = Path(__file__).parents[3] / "bench"


def test_the_list_has_the_scripts_and_not_their_helpers() -> None:
    result = CliRunner().invoke(cli, ["bench", "--list", "--dir", str(BENCH)])
    assert result.exit_code == 0, result.output
    assert "tracing_cost" in result.output
    assert "e2e_latency" in result.output
    assert "baselines" not in result.output.replace("_baseline", "")
    assert "harness" not in result.output
