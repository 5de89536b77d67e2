"""A worker SIGKILLed in the middle of its jobs loses none: the next one runs every job that
had not finished (at least once)."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from conveyor.admin import migrate

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
JOBS = 300


class Worker:
    """One ``conveyor server`` running jobs_app, its ``done <n>`` lines collected."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "server", "--app", "jobs_app:app", "--log-level", "ERROR"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=env, cwd=HERE,
        )  # fmt: skip
        self.done: list[int] = []
        self._changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("done "):
                with self._changed:
                    self.done.append(int(line.split()[1]))
                    self._changed.notify_all()
        self.process.stdout.close()

    def wait_for(self, predicate: Callable[[list[int]], bool], timeout: float = 90) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.done), timeout)


def test_a_sigkilled_worker_loses_no_job(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = uuid.uuid4().hex[:8]
    env = {
        **os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "GROUP": f"jobs-kill-{suffix}",
        "QUEUE": f"kill-{suffix}", "SCHEDULES": f"test-schedules-{suffix}",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }  # fmt: skip
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "GROUP", "QUEUE", "SCHEDULES"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.syspath_prepend(str(TESTS))
    module = runpy.run_path(str(HERE / "jobs_app.py"))  # the same app, to enqueue with
    app, work = module["app"], module["work"]
    migrate(app.admin, app.routes)
    for n in range(JOBS):
        work.enqueue(n, key=f"customer-{n % 7}")
    first = Worker(env)
    try:
        assert first.wait_for(lambda done: len(done) >= JOBS // 4), "the first worker ran jobs"
    finally:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(30)
        first.reader.join(10)
    assert len(first.done) < JOBS, "killed in the middle"
    second = Worker(env)
    try:
        assert second.wait_for(lambda done: set(first.done) | set(done) >= set(range(JOBS))), (
            f"missing: {sorted(set(range(JOBS)) - set(first.done) - set(second.done))[:20]}"
        )
    finally:
        second.process.send_signal(signal.SIGTERM)
        assert second.process.wait(60) == 0
        second.reader.join(10)
    app.producer.close()
