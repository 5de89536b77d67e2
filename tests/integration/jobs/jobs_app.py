"""An app with one job queue for the SIGKILL tests: ``work(n)`` takes a few milliseconds and
says ``done <n>`` on standard output when it finished; ``doomed(n)`` says ``attempt <n>
<attempt>`` and fails (one retry).

Environment: QUEUE, SCHEDULES (the app's schedules topic), GROUP, KAFKA_BOOTSTRAP_SERVERS;
PARTITIONS (the queue's, 3 by default); BLOCK, a job ``work`` says ``started <n>`` for and
then holds until the process is killed; KILL_ON, an event (``job.retried``) at whose first
emission the process SIGKILLs itself."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from app_env import app_from_env
from conveyor.jobs import current_job

app = app_from_env("jobs-server", concurrency=4)
app.schedules.enable(topic=os.environ["SCHEDULES"], partitions=1)
app.jobs.queue(os.environ["QUEUE"], partitions=int(os.environ.get("PARTITIONS", "3")))
_pause = threading.Event()
_BLOCK = int(os.environ.get("BLOCK", "-1"))


def _say(line: str) -> None:
    sys.stdout.write(f"{line}\n")
    sys.stdout.flush()


@app.job(queue=os.environ["QUEUE"], name="work")
def work(n: int) -> None:
    if n == _BLOCK:
        _say(f"started {n}")
        _pause.wait(300)  # in flight until the test kills the process
    _pause.wait(0.005)  # a job that takes a moment: the kill lands in the middle of some
    _say(f"done {n}")


@app.job(queue=os.environ["QUEUE"], name="doomed", retries=1, backoff=0.2)
def doomed(n: int) -> None:
    context = current_job()
    assert context is not None
    _say(f"attempt {n} {context.attempt}")
    raise RuntimeError(f"job {n} always fails")


def _kill(_event: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # at once: nothing after the event is done


if os.environ.get("KILL_ON"):
    app.monitor.subscribe(os.environ["KILL_ON"], _kill)
