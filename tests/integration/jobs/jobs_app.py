"""An app with one job queue for the SIGKILL test: ``work(n)`` takes a few milliseconds and
says ``done <n>`` on standard output when it finished.

Environment: QUEUE, SCHEDULES (the app's schedules topic), GROUP, KAFKA_BOOTSTRAP_SERVERS."""

from __future__ import annotations

import os
import sys
import threading

from app_env import app_from_env

app = app_from_env("jobs-server", concurrency=4)
app.schedules.enable(topic=os.environ["SCHEDULES"], partitions=1)
app.jobs.queue(os.environ["QUEUE"], partitions=3)
_pause = threading.Event()


@app.job(queue=os.environ["QUEUE"], name="work")
def work(n: int) -> None:
    _pause.wait(0.005)  # a job that takes a moment: the kill lands in the middle of some
    sys.stdout.write(f"done {n}\n")
    sys.stdout.flush()
