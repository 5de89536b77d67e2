"""The Conveyor side of bench/scaling.py: one route, a consumer that burns 50 µs of CPU per
message and logs its batches; run by `conveyor swarm --app _scaling_app:app --nodes N`.

Configured by the environment: KAFKA_BOOTSTRAP_SERVERS, TOPIC, GROUP, OUT_DIR."""

from __future__ import annotations

import os

from _scaling_work import BatchLog, burn
from conveyor import App, Consumer

LOG = BatchLog()


class Busy(Consumer):
    def consume(self) -> None:
        burn(len(self.messages))
        LOG.add(len(self.messages))


app = App(
    client_id="bench-scaling",
    kafka={
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": os.environ["GROUP"],
        "auto.offset.reset": "earliest",
    },
    concurrency=2,
    max_messages=500,
    max_wait_time=0.5,
)
app.routes.topic(os.environ["TOPIC"], Busy)
