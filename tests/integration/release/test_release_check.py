"""The release check (``tools/check-release``, also ``make release-check``) runs with the suite,
against the session's broker: the sdist and the wheel are built and checked, the wheel installs
alone into a clean virtual environment, and a hello app run from it produces and consumes.

A test rather than a step of ``make test`` of its own: it then shares the suite's broker
instead of starting and stopping one, and its builds and installs overlap the tests that wait.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("release")  # xdist: see tests/conftest.py

CHECK = Path(__file__).parents[3] / "tools" / "check-release"


def test_the_release_installs_and_runs_as_a_user_gets_it(kafka_bootstrap: str) -> None:
    done = subprocess.run(
        [sys.executable, str(CHECK)],
        cwd=CHECK.parent.parent,
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-6000:]
    assert "check-release: passed" in said, said[-6000:]
