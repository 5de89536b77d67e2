"""An app for the connector crash test: TOPIC into PostgreSQL (DSN, TABLE), 16 lanes, SLOW
seconds per record; prints ``commit <next offset> <unix time>`` per commit of partition 0."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from app_env import app_from_env
from conveyor.connect.sinks import Postgres, record_json

SLOW = float(os.environ.get("SLOW", "0"))
_out = threading.Lock()


def slow_encode(record: Any) -> dict[str, Any]:
    time.sleep(SLOW)
    return record_json(record)


def on_commit(event: dict[str, Any]) -> None:
    now = time.time()
    with _out:
        for _, partition, offset in event["offsets"]:
            if partition == 0:
                sys.stdout.write(f"commit {offset} {now:.6f}\n")
        sys.stdout.flush()


app = app_from_env("pg-connector", kafka={"auto.commit.interval.ms": 100}, concurrency=8)
app.routes.sink(
    os.environ["TOPIC"],
    Postgres(os.environ["DSN"], table=os.environ["TABLE"], encode=slow_encode),
    lanes=16,
    max_batch=20,
)
app.monitor.subscribe("offsets.committed", on_commit)
