"""The Dramatiq side of ``jobs``: a no-op actor on Redis (``$JOBS_REDIS``), queue
``$JOBS_QUEUE``; the worker is ``dramatiq _jobs_dramatiq``, the enqueuer ``python
_jobs_dramatiq.py steady|fill COUNT [RATE]`` (in the peers' environment)."""

from __future__ import annotations

import os
import sys
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from _jobs_record import record, steady

dramatiq.set_broker(RedisBroker(url=os.environ["JOBS_REDIS"]))


@dramatiq.actor(queue_name=os.environ["JOBS_QUEUE"], max_retries=0)
def noop(enqueued: float) -> None:
    record(enqueued)


if __name__ == "__main__":
    what, count = sys.argv[1], int(sys.argv[2])
    if what == "steady":
        steady(noop.send, count, float(sys.argv[3]))
    else:
        for _ in range(count):
            noop.send(time.time())
