"""The pytest plugin, as a user's project meets it: installed with Conveyor, the fixtures
load the app named in pyproject.toml and make its consumers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

APP = """
from conveyor import App, Consumer

app = App(client_id="user", kafka={"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})


class Greeter(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            self.produce_sync(topic="greetings", payload=f"hello {message.payload['name']}")


app.routes.topic("names", Greeter)
"""

TESTS = """
from conveyor import testing


def test_greets(conveyor_app, conveyor_consumer):
    greeter = conveyor_consumer("names")
    testing.produce(greeter, {"name": "Ada"})
    testing.consume(greeter)
    assert [m.raw_payload for m in testing.produced(conveyor_app)] == [b"hello Ada"]


def test_starts_with_nothing_captured(conveyor_app):
    assert testing.produced(conveyor_app) == []
"""


def run_pytest(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "CONVEYOR_APP"},
    )  # fmt: skip


def test_the_fixtures_load_the_app_named_in_the_project_settings(tmp_path: Path) -> None:
    (tmp_path / "greeter.py").write_text(APP)
    (tmp_path / "test_greeter.py").write_text(TESTS)
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""
            [tool.pytest.ini_options]
            conveyor_app = "greeter:app"
        """)
    )
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_without_an_app_named_the_fixture_says_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "test_greeter.py").write_text(TESTS)
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    done = run_pytest(tmp_path)
    assert done.returncode != 0
    assert "conveyor_app" in done.stdout + done.stderr
    assert "[tool.pytest.ini_options]" in done.stdout + done.stderr
