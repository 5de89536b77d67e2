"""The Celery side of ``jobs``: a no-op task on Redis (``$JOBS_REDIS``), queue ``$JOBS_QUEUE``,
its results ignored; the worker is ``celery -A _jobs_celery worker``, the enqueuer
``python _jobs_celery.py steady|fill COUNT [RATE]`` (in the peers' environment)."""

from __future__ import annotations

import os
import sys
import time

from celery import Celery

from _jobs_record import record, steady

app = Celery("bench_jobs", broker=os.environ["JOBS_REDIS"])
app.conf.update(task_default_queue=os.environ["JOBS_QUEUE"], task_ignore_result=True,
                worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)  # fmt: skip


@app.task(name="noop")
def noop(enqueued: float) -> None:
    record(enqueued)


if __name__ == "__main__":
    what, count = sys.argv[1], int(sys.argv[2])
    if what == "steady":
        steady(noop.delay, count, float(sys.argv[3]))
    else:
        for _ in range(count):
            noop.delay(time.time())
