"""An app for the server tests: its consumer prints what it processed, one line per batch.

Configured by the environment: TOPIC, GROUP, KAFKA_BOOTSTRAP_SERVERS, GROUP_PROTOCOL (classic
or consumer, KIP-848), and SLOW (seconds per batch, to leave time to interrupt it). Lines on standard output:
``batch <partition> <first offset> <last offset>``, ``revoked <partition>``,
``shutdown <partition>``, ``assigned <partitions>``.
"""

from __future__ import annotations

import os
import sys
import time

from app_env import app_from_env
from conveyor import Consumer

SLOW = float(os.environ.get("SLOW", "0"))


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class ReportingConsumer(Consumer):
    def consume(self) -> None:
        if SLOW:
            time.sleep(SLOW)  # simulated work, so that a test can interrupt mid-stream
        say(f"batch {self.partition} {self.messages.first.offset} {self.messages.last.offset}")

    def revoked(self) -> None:
        say(f"revoked {self.partition}")

    def shutdown(self) -> None:
        say(f"shutdown {self.partition}")


PROTOCOL = os.environ.get("GROUP_PROTOCOL", "classic")
app = app_from_env(
    "reporting",
    kafka={
        "auto.commit.interval.ms": 500,
        "group.protocol": PROTOCOL,
        # under the new protocol the broker decides the session (the development broker's
        # group.consumer.session.timeout.ms is 10 s): librdkafka refuses the setting then
        **({"session.timeout.ms": None} if PROTOCOL != "classic" else {}),
    },
    concurrency=2,
    max_messages=200,
    shutdown_timeout=20,
)
app.routes.topic(os.environ["TOPIC"], ReportingConsumer)
app.monitor.subscribe("app.quieting", lambda _event: say("quiet"))
app.monitor.subscribe("app.running", lambda _event: say("running"))
app.monitor.subscribe(
    "rebalance.partitions_assigned",
    lambda event: say("assigned " + ",".join(str(p) for _, p in event["partitions"])),
)
