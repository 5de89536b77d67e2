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


def fake_scripts(folder: Path, record: Path) -> None:
    for name in ("_warm_up", "first", "second"):
        (folder / f"{name}.py").write_text(
            "import sys\n"
            f"with open({str(record)!r}, 'a') as out:\n"
            f"    out.write({name!r} + ' ' + ' '.join(sys.argv[1:]) + '\\n')\n"
        )


def test_the_broker_is_warmed_up_before_the_first_benchmark(tmp_path: Path) -> None:
    record = tmp_path / "ran.txt"
    fake_scripts(tmp_path, record)
    result = CliRunner().invoke(cli, ["bench", "--dir", str(tmp_path), "--warm-up", "12"])
    assert result.exit_code == 0, result.output
    assert record.read_text().splitlines() == ["_warm_up --seconds 12.0", "first ", "second "]


def test_a_warm_up_of_zero_skips_it(tmp_path: Path) -> None:
    record = tmp_path / "ran.txt"
    fake_scripts(tmp_path, record)
    result = CliRunner().invoke(cli, ["bench", "second", "--dir", str(tmp_path), "--warm-up", "0"])
    assert result.exit_code == 0, result.output
    assert record.read_text().splitlines() == ["second "]


def test_a_failed_warm_up_stops_before_the_benchmarks(tmp_path: Path) -> None:
    record = tmp_path / "ran.txt"
    fake_scripts(tmp_path, record)
    (tmp_path / "_warm_up.py").write_text("raise SystemExit('no broker')\n")
    result = CliRunner().invoke(cli, ["bench", "--dir", str(tmp_path)])
    assert result.exit_code != 0
    assert "Warming the broker up failed" in result.output
    assert not record.exists(), "no benchmark ran"
