"""An app with the web UI enabled, for the web tests (run in-process or by `conveyor server`
and `conveyor web`). Configured by the environment: KAFKA_BOOTSTRAP_SERVERS, TOPIC, GROUP,
WEB_PREFIX (the web topics' and group's prefix), TRACKING_INTERVAL (seconds, default 0.5)
FAIL_OFFSET (the consumer raises ValueError once on this offset), PROCESSED_FILE (each
processed message appends "partition offset" there), DLQ_TOPIC (failures go there at once)
and HEALED_FILE (while it does not exist, a message whose key starts with "bad" fails)."""

from __future__ import annotations

import os
import threading

from app_env import app_from_env
from conveyor import Consumer
from conveyor.web import WebTopics

FAIL_OFFSET = int(os.environ.get("FAIL_OFFSET", "-1"))
PROCESSED_FILE = os.environ.get("PROCESSED_FILE")
DLQ_TOPIC = os.environ.get("DLQ_TOPIC")
HEALED_FILE = os.environ.get("HEALED_FILE")
_failed = threading.Event()
_processed_lock = threading.Lock()


class OrdersConsumer(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            if message.offset == FAIL_OFFSET and not _failed.is_set():
                _failed.set()
                reject_order(message.offset)
            key = message.key or ""
            if HEALED_FILE and str(key).startswith("bad") and not os.path.exists(HEALED_FILE):
                reject_order(message.offset)
            if DLQ_TOPIC:
                self.mark_as_consumed(message)  # a failure after it dead-letters the next one
        if PROCESSED_FILE:
            lines = "".join(f"{m.partition} {m.offset}\n" for m in self.messages)
            with _processed_lock, open(PROCESSED_FILE, "a") as out:
                out.write(lines)


def reject_order(offset: int) -> None:
    raise ValueError(f"order at offset {offset} has no customer")


app = app_from_env(
    "webshop",
    kafka={"group.id": os.environ.get("GROUP", "webshop")},
    concurrency=2,
    pause_timeout=0.2,
)
app.routes.topic(
    os.environ.get("TOPIC", "webshop-orders"),
    OrdersConsumer,
    partitions=2,
    dead_letter_queue={"topic": DLQ_TOPIC, "max_retries": 0} if DLQ_TOPIC else None,
)
app.latency.enable()  # the process page shows where the time goes
app.web.enable(
    tracking_interval=float(os.environ.get("TRACKING_INTERVAL", "0.5")),
    topics=WebTopics.prefixed(os.environ.get("WEB_PREFIX", "webtest")),
    aggregate=os.environ.get("AGGREGATE", "1") == "1",
)
