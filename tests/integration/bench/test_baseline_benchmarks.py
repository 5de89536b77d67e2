"""The baseline benchmarks run against the real broker and print one JSON line per figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("bench")  # xdist: see tests/conftest.py

BENCH = Path(__file__).parents[3] / "bench"


@pytest.mark.parametrize("script", ["produce_baseline", "consume_baseline"])
def test_prints_a_table_and_json_lines(script: str, kafka_bootstrap: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH / f"{script}.py"),
            "--repeats",
            "1",
            "--messages",
            "2000",
            "--bootstrap",
            kafka_bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2
    for line in lines:
        assert line["bench"] == script
        assert line["value"] > 0
        assert set(line) >= {"figure", "value", "unit", "baseline", "ratio"}
    # the JSON line's ratio is rounded to 4 decimals: a small one differs by up to 5e-5
    assert lines[1]["ratio"] == pytest.approx(
        lines[1]["value"] / lines[1]["baseline"], rel=1e-3, abs=5e-5
    )
    assert "median of 1 runs" in result.stderr
