"""Every benchmark script runs end to end against the real broker (tiny sizes, one repeat)
and prints its table and JSON lines, so the scripts behind the README's figures do not rot."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("bench")  # xdist: see tests/conftest.py

BENCH = Path(__file__).parents[3] / "bench"


@pytest.mark.parametrize(
    ("script", "arguments"),
    [
        ("produce_async", ["--messages", "3000"]),
        ("produce_sync", ["--calls", "20", "--seconds", "0.5", "--sleep-calls", "3"]),
        ("consume_throughput", ["--messages", "3000"]),
        ("stateful", ["--messages", "3000", "--no-peers"]),
        ("state_restore", ["--records", "20000", "--no-peers"]),
        ("typed_consume", ["--messages", "3000", "--no-peers"]),
        ("jobs", ["--jobs", "2000", "--seconds", "0.5", "--sides", "conveyor,bare"]),
        ("web_reporting", ["--messages", "3000"]),
        ("tracing_cost", ["--messages", "3000", "--seconds", "0.5", "--turns", "2"]),
        ("e2e_latency", ["--seconds", "0.5"]),
        ("rpc", []),
        ("virtual_partitions", ["--scale", "0.1", "--seconds", "0.5", "--lanes", "1,4"]),
        ("connector_latency", ["--seconds", "0.5", "--only", "broadcast, 64 lanes"]),
        ("scaling", ["--messages", "3000", "--nodes", "1,2"]),
        ("eos_recovery", ["--fenced-only"]),
        ("produce_sync_cpu", ["--quick"]),
        ("topics_threads", ["--quick"]),
        ("connector_batching", ["--quick"]),
        ("connector_tasks", ["--quick"]),
        ("message_sizes", ["--quick"]),
        (
            "connect",
            [
                "--seconds",
                "1",
                "--rows",
                "2000",
                "--lines",
                "2000",
                "--rates",
                "1000",
                "--no-peers",
            ],
        ),
    ],
)
def test_benchmark_script_runs(script: str, arguments: list[str], kafka_bootstrap: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / f"{script}.py"), "--repeats", "1", "--bootstrap", kafka_bootstrap, *arguments],
        capture_output=True, text=True, timeout=240, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    figures = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert figures
    assert all(figure["bench"] == script for figure in figures)
    # Every figure measured something; one that is a difference (tracing_cost's added p50)
    # may be below zero in a short run (the noise), but never missing.
    assert all(
        math.isfinite(figure["value"]) and (figure["value"] > 0 or figure["difference"])
        for figure in figures
    ), [(figure["figure"], figure["value"]) for figure in figures]
    if script == "e2e_latency":
        assert "poll→start" in result.stderr, "the stage table is printed"


def test_the_warm_up_runs_traffic_through_the_broker(kafka_bootstrap: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "_warm_up.py"), "--seconds", "1", "--bootstrap", kafka_bootstrap],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warmed the broker up" in result.stderr
    assert "round trips" in result.stderr
