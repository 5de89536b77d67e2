"""A worker SIGKILLed in the middle of its jobs loses none: the next one runs every job that
had not finished (at least once); once the queue committed what finished, only the job in
flight runs again; a kill right after a failed attempt stored its retry (or its death) does
not run that attempt again, so the job is retried once and dies once."""

from __future__ import annotations

import os
import runpy
import signal
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conveyor.admin import migrate
from conveyor.web.reading.explorer import Explorer
from conveyor.web.reading.explorer_query import Start
from helpers import ServerProcess, conveyor_argv

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
JOBS = 300


class Worker(ServerProcess):
    """One ``conveyor server`` running jobs_app, its ``done <n>``, ``started <n>`` and
    ``attempt <n> <attempt>`` lines collected."""

    def __init__(self, env: dict[str, str]) -> None:
        self.done: list[int] = []
        self.started: list[int] = []
        self.attempts: list[tuple[int, int]] = []
        argv = conveyor_argv("server", "--app", "jobs_app:app", "--log-level", "ERROR")
        super().__init__(argv, env=env, cwd=HERE, wait=90)

    def heard(self, line: str) -> None:
        words = line.split()
        if words[:1] == ["done"]:
            self.done.append(int(words[1]))
        elif words[:1] == ["started"]:
            self.started.append(int(words[1]))
        elif words[:1] == ["attempt"]:
            self.attempts.append((int(words[1]), int(words[2])))

    def wait_for_done(self, predicate: Callable[[list[int]], bool]) -> bool:
        """Block (woken by each new line) until ``predicate(done)`` holds."""
        return self.wait_until(lambda: predicate(self.done))


def _environment(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, **extra: str
) -> tuple[dict[str, str], dict[str, Any]]:
    """The workers' environment (a queue, group and schedules topic of the test's own), and
    jobs_app's namespace in this process, to enqueue with."""
    suffix = uuid.uuid4().hex[:8]
    env = {
        **os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "GROUP": f"jobs-kill-{suffix}",
        "QUEUE": f"kill-{suffix}", "SCHEDULES": f"test-schedules-{suffix}",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS), os.environ.get("PYTHONPATH", "")]),
        **extra,
    }  # fmt: skip
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "GROUP", "QUEUE", "SCHEDULES", *extra):
        monkeypatch.setenv(name, env[name])
    monkeypatch.delenv("BLOCK", raising=False)  # this process's copy never blocks nor kills
    monkeypatch.delenv("KILL_ON", raising=False)
    monkeypatch.syspath_prepend(str(TESTS))
    module = runpy.run_path(str(HERE / "jobs_app.py"))
    migrate(module["app"].admin, module["app"].routes)
    return env, module


def test_a_sigkilled_worker_loses_no_job(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env, module = _environment(kafka_bootstrap, monkeypatch)
    app, work = module["app"], module["work"]
    for n in range(JOBS):
        work.enqueue(n, key=f"customer-{n % 7}")
    first = Worker(env)
    try:
        assert first.wait_for_done(lambda done: len(done) >= JOBS // 4), "the first worker ran jobs"
    finally:
        first.kill()
    assert len(first.done) < JOBS, "killed in the middle"
    second = Worker(env)
    try:
        assert second.wait_for_done(lambda done: set(first.done) | set(done) >= set(range(JOBS))), (
            f"missing: {sorted(set(range(JOBS)) - set(first.done) - set(second.done))[:20]}"
        )
    finally:
        assert second.stop() == 0
    app.producer.close()


def test_after_a_kill_only_the_job_in_flight_runs_again(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs are marked as each ends and a queue commits them within its commit interval:
    once the group's offset passed the jobs that finished, a kill runs none of them again
    (the batch they came in was still running: job 20 holds it)."""
    count, blocking = 40, 20
    env, module = _environment(kafka_bootstrap, monkeypatch, PARTITIONS="1")
    app, work = module["app"], module["work"]
    for n in range(count):  # one partition, one batch: the worker runs them in order
        work.enqueue(n)
    first = Worker({**env, "BLOCK": str(blocking)})
    try:
        assert first.wait_until(lambda: first.started == [blocking]), "job 20 is in flight"
        assert first.done == list(range(blocking))
        group, topic = env["GROUP"], work.queue.topic
        committed = None
        for _ in range(600):  # the finished jobs' offsets reach the group (bounded wait)
            lags = [lag for lag in app.admin.read_lags([group]) if lag.topic == topic]
            committed = lags[0].committed if lags else None
            if committed == blocking:
                break
            first.wait_until(lambda: False, timeout=0.1)
        assert committed == blocking, f"committed {committed}: the batch's finished jobs too"
    finally:
        first.kill()
    second = Worker(env)
    try:
        assert second.wait_for_done(lambda done: set(first.done) | set(done) >= set(range(count)))
    finally:
        assert second.stop() == 0
    assert set(first.done) & set(second.done) == set(), "no finished job ran again"
    assert second.done[0] == blocking, "the job in flight ran again, first"
    app.producer.close()


@pytest.mark.parametrize("kill_on", ["job.retried", "job.died"])
def test_a_kill_right_after_a_failure_was_stored_runs_that_attempt_not_again(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, kill_on: str
) -> None:
    """The retry (or the death) and the failed message's offset are stored as one step: the
    worker killed just after it leaves nothing to replay, so the job is retried once and
    dies once (each replayed attempt used to schedule a retry of its own)."""
    env, module = _environment(kafka_bootstrap, monkeypatch, PARTITIONS="1")
    app, work, doomed = module["app"], module["work"], module["doomed"]
    doomed.enqueue(1)
    first = Worker({**env, "KILL_ON": kill_on})
    try:
        assert first.process.wait(120) == -signal.SIGKILL, f"killed itself at {kill_on}"
    finally:
        if first.process.poll() is None:
            first.kill()
        first.join()
    expected_first = [(1, 1)] if kill_on == "job.retried" else [(1, 1), (1, 2)]
    assert first.attempts == expected_first
    second = Worker(env)
    try:
        if kill_on == "job.retried":  # the retry stored before the kill runs here
            assert second.wait_until(lambda: (1, 2) in second.attempts)
        work.enqueue(0)  # behind every replay in the partition
        assert second.wait_for_done(lambda done: done == [0])
        dead = _every_message(app, doomed.queue.dead_topic)
    finally:
        assert second.stop() == 0
    assert first.attempts + second.attempts == [(1, 1), (1, 2)], "each attempt ran once"
    assert len(dead) == 1, "dead once"
    app.producer.close()


def _every_message(app: Any, topic: str) -> list[Any]:
    """Every committed message of ``topic``, read to its end."""
    for _ in range(300):  # the dead job reaches its topic (bounded wait)
        raws, complete = Explorer(app.settings.kafka, timeout=30).scan(
            topic, Start("offset", 0), 1000
        )
        assert complete
        if raws:
            return raws
        threading.Event().wait(0.1)
    return []
