"""``conveyor jobs``: the queues with their dead jobs, a dead job's arguments and error, and
retrying it (from the command line) once the cause is gone."""

from __future__ import annotations

import importlib
import json
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor.admin import migrate
from conveyor.cli.main import cli
from helpers import running

APP = """
from conveyor import App
from helpers import Record

app = App(client_id="jobs-cli", kafka={{"bootstrap.servers": "{bootstrap}",
                                        "group.id": "jobs-cli-{suffix}"}}, max_wait_time=0.1)
app.schedules.enable(topic="test-schedules-{suffix}", partitions=1)
healed = []
done = Record()


@app.job(queue="bills-{suffix}", retries=0)
def bill(order: int, note: str = "") -> None:
    if not healed:
        raise ValueError(f"order {{order}} cannot be billed yet")
    done.add(order)
"""


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_dead_jobs_are_listed_and_retried_from_the_command_line(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = uuid.uuid4().hex[:8]
    module_name = f"jobs_cli_{suffix}"
    (tmp_path / f"{module_name}.py").write_text(
        APP.format(bootstrap=kafka_bootstrap, suffix=suffix)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(module_name)
    app, bill, queue = module.app, module.bill, f"bills-{suffix}"
    spec = f"{module_name}:app"
    migrate(app.admin, app.routes)
    try:
        with running(app):
            bill.enqueue(1, note="first")
            bill.enqueue(2)
            for _ in range(300):  # both dead: the dead-job topic holds them (bounded wait)
                code, output = _invoke("jobs", "queues", "--app", spec, "--json")
                if code == 0 and json.loads(output)[0]["dead"] == 2:
                    break
                module.done.wait_for(lambda items: False, timeout=0.1)
            [row] = json.loads(output)
            assert (row["queue"], row["dead"], row["jobs"]) == (queue, 2, [f"{module_name}.bill"])
            code, output = _invoke("jobs", "queues", "--app", spec)
            assert code == 0
            assert queue in output
            code, output = _invoke("jobs", "dead", queue, "--app", spec, "--json")
            assert code == 0, output
            dead = {d["args"][0]: d for d in json.loads(output)}
            assert set(dead) == {1, 2}
            assert dead[1]["kwargs"] == {"note": "first"}
            assert dead[1]["error_class"] == "ValueError"
            assert dead[1]["error_message"] == "order 1 cannot be billed yet"
            assert dead[1]["attempts"] == 1
            code, output = _invoke("jobs", "dead", queue, "--app", spec)
            assert "order 1 cannot be billed yet" in output
            module.healed.append(True)
            code, output = _invoke("jobs", "retry", queue, "--app", spec, "--ref", dead[1]["ref"])
            assert code == 0, output
            assert module.done.wait_for(lambda items: items == [1])
            code, output = _invoke("jobs", "discard", queue, "--app", spec, "--ref", dead[2]["ref"])
            assert code == 0, output
            assert "discarded 1 dead job(s)" in output
            code, output = _invoke("jobs", "dead", queue, "--app", spec, "--json")
            assert {d["args"][0] for d in json.loads(output)} == {1}, (
                "a discarded one is not listed"
            )
            code, output = _invoke(
                "jobs", "dead", queue, "--app", spec, "--json", "--with-discarded"
            )
            assert {d["args"][0] for d in json.loads(output)} == {1, 2}
            code, output = _invoke("jobs", "retry", queue, "--app", spec, "--all")
            assert code == 0, output
            assert "sent 1 dead job(s)" in output, "--all leaves the discarded one dead"
            assert module.done.wait_for(lambda items: sorted(items) == [1, 1])
            code, output = _invoke("jobs", "retry", queue, "--app", spec, "--ref", dead[2]["ref"])
            assert "sent 0 dead job(s)" in output, "nor is it sent back by its ref"
            code, output = _invoke("jobs", "retry", queue, "--app", spec)
            assert code == 2, "--ref or --all"
            code, output = _invoke("jobs", "dead", "nope", "--app", spec)
            assert code == 1
            assert "has no job queue 'nope'" in output
    finally:
        sys.modules.pop(module_name, None)


def test_every_dead_job_is_discarded_with_all(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = uuid.uuid4().hex[:8]
    module_name = f"jobs_cli_all_{suffix}"
    (tmp_path / f"{module_name}.py").write_text(
        APP.format(bootstrap=kafka_bootstrap, suffix=suffix)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(module_name)
    app, bill, queue = module.app, module.bill, f"bills-{suffix}"
    spec = f"{module_name}:app"
    migrate(app.admin, app.routes)
    try:
        code, output = _invoke("jobs", "discard", queue, "--app", spec, "--all", "--yes")
        assert (code, "no dead job" in output) == (0, True), output
        with running(app):
            for order in range(3):
                bill.enqueue(order)
            for _ in range(300):  # all three dead (bounded wait)
                code, output = _invoke("jobs", "dead", queue, "--app", spec, "--json")
                if code == 0 and len(json.loads(output)) == 3:
                    break
                module.done.wait_for(lambda items: False, timeout=0.1)
            code, output = _invoke("jobs", "discard", queue, "--app", spec, "--all")
            assert code == 1, "asks first; without a terminal it refuses"
            assert "Discard 3 dead job(s)" in output
            assert "pass --yes" in output
            code, output = _invoke("jobs", "discard", queue, "--app", spec, "--all", "--yes")
            assert code == 0, output
            assert "discarded 3 dead job(s)" in output
            code, output = _invoke("jobs", "dead", queue, "--app", spec, "--json")
            assert json.loads(output) == [], "none listed any more"
            code, output = _invoke("jobs", "discard", queue, "--app", spec, "--all", "--yes")
            assert "no dead job" in output, "the discarded are not discarded again"
            code, output = _invoke("jobs", "discard", queue, "--app", spec)
            assert code == 2, "--ref or --all"
    finally:
        sys.modules.pop(module_name, None)
