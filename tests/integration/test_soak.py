"""The soak's short form: one minute of faults on a local 3-broker cluster (every kind of fault
once: a swarm node killed, a broker restarted, a broker frozen, the feeder killed), then every
invariant of `make soak` checked (tests/soak/soak.py; `make soak` runs it for 10 minutes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import conveyor_cli

pytestmark = pytest.mark.xdist_group("cluster")  # xdist: see tests/conftest.py

SOAK = Path(__file__).resolve().parent.parent / "soak" / "soak.py"


@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_a_minute_of_faults_breaks_no_invariant(tmp_path: Path) -> None:
    workdir = tmp_path / "soak"
    try:
        run = subprocess.run(
            [sys.executable, str(SOAK), "--minutes", "1", "--fault-every", "3", "6",
             "--seed", "33", "--workdir", str(workdir)],
            capture_output=True, text=True, timeout=840, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:  # a soak killed by the timeout leaves its cluster's brokers running
        if (workdir / "cluster").exists():
            conveyor_cli("broker", "stop", "--cluster", "--wipe", "--data-dir", workdir / "cluster")
    summary_lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert summary_lines, run.stderr[-6000:]
    summary = json.loads(summary_lines[-1])
    assert summary["violations"] == [], run.stderr[-12000:]
    assert run.returncode == 0, run.stderr[-6000:]
    assert set(summary["fault_kinds"]) == {"kill node", "restart broker", "freeze broker",
                                           "kill feeder"}, summary  # fmt: skip
    assert summary["inputs"] > 5_000, summary
