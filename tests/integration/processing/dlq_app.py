"""An app for the SIGKILL-after-dispatch test: order -1 is poison; every dispatch is announced.

Environment: TOPIC, DLQ, GROUP, KAFKA_BOOTSTRAP_SERVERS; COMMIT_MS (the listener's commit
interval, default 200). Lines on standard output: ``batch <partition> <first offset> <last
offset>`` and ``dispatched <offset>``.
"""

from __future__ import annotations

import os
import sys

from app_env import app_from_env
from conveyor import Consumer


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Strict(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            if message.payload["n"] == -1:
                raise ValueError("poison")
            say(f"batch {self.partition} {message.offset} {message.offset}")  # one line per message
            self.mark_as_consumed(message)


app = app_from_env(
    "dlq-server",
    kafka={"auto.commit.interval.ms": int(os.environ.get("COMMIT_MS", "200"))},
    pause_timeout=0.05,
    pause_max_timeout=0.1,
)
app.routes.topic(
    os.environ["TOPIC"],
    Strict,
    dead_letter_queue={
        "topic": os.environ["DLQ"],
        "max_retries": 1,
    },
)
app.monitor.subscribe(
    "dead_letter_queue.dispatched", lambda event: say(f"dispatched {event['offset']}")
)
app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: say("assigned"))
