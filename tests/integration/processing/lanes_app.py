"""An app for the virtual partitions server test: 16 lanes over one partition; its consumer
prints each message it processed and the app prints each commit.

Configured by the environment: TOPIC, GROUP, KAFKA_BOOTSTRAP_SERVERS, SLOW (seconds per
message). Lines on standard output: ``p <offset> <key> <sequence>`` per message processed,
``commit <next offset>`` per commit of the topic's partition 0, ``assigned <partitions>``.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from app_env import app_from_env
from conveyor import Consumer

SLOW = float(os.environ.get("SLOW", "0"))
_out = threading.Lock()


def say(lines: list[str]) -> None:
    with _out:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()


class LaneConsumer(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            time.sleep(SLOW)
            # printed before consume() returns, so before its offset can be marked
            say([f"p {message.offset} {message.key} {message.payload['seq']}"])


app = app_from_env(
    "lanes",
    kafka={"auto.commit.interval.ms": 100},
    concurrency=16,
    max_messages=20,
    shutdown_timeout=20,
)
app.routes.topic(os.environ["TOPIC"], LaneConsumer, virtual_partitions={"max_partitions": 16})
app.monitor.subscribe(
    "offsets.committed",
    lambda event: say(
        [f"commit {offset}" for _, partition, offset in event["offsets"] if partition == 0]
    ),
)
app.monitor.subscribe(
    "rebalance.partitions_assigned",
    lambda event: say(["assigned " + ",".join(str(p) for _, p in event["partitions"])]),
)
