"""An app that dispatches scheduled messages, for the SIGKILL test: it says ``pending <n>``
on standard output each time the number of schedules it holds changes, and ``sent <id>``
for each message it sends.

Environment: SCHEDULES (the schedules topic), TARGET (the topic the schedules are for: the
app dispatches for others and routes none of its own), GROUP, KAFKA_BOOTSTRAP_SERVERS."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from app_env import app_from_env

app = app_from_env("schedules-server")
app.schedules.enable(
    topic=os.environ["SCHEDULES"], partitions=1, allowed_topics=[os.environ["TARGET"]]
)
_lock = threading.Lock()


def say(line: str) -> None:
    with _lock:
        sys.stdout.write(f"{line}\n")
        sys.stdout.flush()


def watch_pending() -> None:
    seen = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and app.state != "stopped":
        pending = app.schedules.pending()
        if pending != seen:
            say(f"pending {pending}")
            seen = pending
        threading.Event().wait(0.02)


def started(_event: Any) -> None:
    threading.Thread(target=watch_pending, daemon=True).start()


app.monitor.subscribe("app.running", started)
app.monitor.subscribe("schedule.dispatched", lambda event: say(f"sent {event['id']}"))
