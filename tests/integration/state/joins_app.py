"""An app for the exactly-once join test: pairs TOPIC's messages with RIGHT's of one key within
5 s (the messages' own timestamps) and sends each pair to OUTPUT (key: the key; payload: the
two offsets), in one transaction with the join's store and the offset.

Configured by the environment: TOPIC, RIGHT, OUTPUT, GROUP, KAFKA_BOOTSTRAP_SERVERS, STATE_DIR
and SLOW (seconds each batch's worker waits after it: the input lasts long enough for the
kills). Prints ``batch <partition>`` after each batch.
"""

from __future__ import annotations

import os

from app_env import app_from_env, report_batches
from conveyor import Consumer
from conveyor.state import Join

OUTPUT = os.environ["OUTPUT"]


class Paid(Consumer):
    join = Join(os.environ["RIGHT"], within=5, grace=3600)

    def consume(self) -> None:
        with self.transaction():
            pairs = [
                {"topic": OUTPUT, "key": pair.key,
                 "payload": {"left": pair.left.offset, "right": pair.right.offset}}
                for pair in self.join.update(self.messages)
            ]  # fmt: skip
            if pairs:
                self.produce_many_async(pairs)
            self.mark_as_consumed(self.messages.last)


app = app_from_env(
    f"joins-{os.environ['GROUP']}",  # its own slots (see conveyor.slots)
    kafka={"transaction.timeout.ms": 600_000},
    concurrency=2,
    max_messages=5,  # the orders last several batches a process: the kills land mid-stream
    shutdown_timeout=20,
    state_dir=os.environ["STATE_DIR"],
)
app.routes.topic(os.environ["TOPIC"], Paid)

report_batches(app)
