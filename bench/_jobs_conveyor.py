"""The Conveyor side of ``jobs``: an app with one job queue (``$JOBS_QUEUE``) and a no-op job
that records when it ran; run as the worker by ``conveyor server --app _jobs_conveyor:app``,
and as the enqueuer by ``python _jobs_conveyor.py steady|fill COUNT [RATE]``."""

from __future__ import annotations

import os
import sys
import time

from _jobs_record import record, steady
from conveyor import App
from conveyor.jobs.wire import ATTEMPT, ID, NAME, encode

app = App(
    client_id="bench-jobs",
    kafka={"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
           "group.id": os.environ["JOBS_GROUP"]},
    concurrency=4, max_wait_time=0.5,
)  # fmt: skip
app.schedules.enable(topic=os.environ["JOBS_SCHEDULES"], partitions=1)
app.jobs.queue(os.environ["JOBS_QUEUE"], partitions=4)


@app.job(queue=os.environ["JOBS_QUEUE"], name="noop")
def noop(enqueued: float) -> None:
    record(enqueued)


def fill(count: int) -> None:
    """``count`` jobs at once, in bursts (the same messages ``enqueue`` sends)."""
    topic = noop.queue.topic
    messages = []
    for _ in range(count):
        envelope, payload = encode("noop", (time.time(),), {})
        headers = [(NAME, "noop"), (ID, envelope.id), (ATTEMPT, "1")]
        messages.append({"topic": topic, "payload": payload, "headers": headers})
        if len(messages) == 10_000:
            app.producer.produce_many_sync(messages)
            messages = []
    if messages:
        app.producer.produce_many_sync(messages)


if __name__ == "__main__":
    what, count = sys.argv[1], int(sys.argv[2])
    if what == "migrate":
        from conveyor.admin import migrate

        migrate(app.admin, app.routes)
    elif what == "steady":
        steady(noop.enqueue, count, float(sys.argv[3]))  # each enqueued as a user would
    else:
        fill(count)
    app.producer.close()
