"""An app for the swarm tests. Each processed message appends ``<pid> <partition> <offset>``
to PROCESSED_DIR/<pid>.txt (flushed before the batch is marked); a message whose payload is
``leak`` makes the node hold LEAK_MB megabytes for good; the first ``hang`` never returns.

Configured by the environment: TOPIC, GROUP, KAFKA_BOOTSTRAP_SERVERS, PROCESSED_DIR, LEAK_MB,
CONSUMING_TTL (liveness), GROUP_PROTOCOL (with ``consumer`` the app's own session.timeout.ms
is refused: the bad-input test) and WEB_PREFIX (the nodes report to the web UI's topics under that prefix).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from app_env import app_from_env
from conveyor import Consumer
from conveyor.web import WebTopics

PROCESSED = Path(os.environ["PROCESSED_DIR"])
_held: list[bytearray] = []


class Work(Consumer):
    def consume(self) -> None:
        lines = []
        for message in self.messages:
            if message.raw_payload == b"hang" and not (PROCESSED / "hung").exists():
                (PROCESSED / "hung").touch()
                threading.Event().wait()  # stuck for good, the first time only
            if message.raw_payload == b"leak":
                block = bytearray(int(os.environ.get("LEAK_MB", "300")) << 20)
                block[::4096] = b"x" * len(block[::4096])  # touch every page: resident
                _held.append(block)
            lines.append(f"{os.getpid()} {message.partition} {message.offset}\n")
        with open(PROCESSED / f"{os.getpid()}.txt", "a") as out:
            out.write("".join(lines))
            out.flush()


app = app_from_env(
    "swarm",
    kafka={
        "auto.commit.interval.ms": 200,
        "group.protocol": os.environ.get("GROUP_PROTOCOL", "classic"),
    },
    concurrency=2,
    max_messages=20,
    shutdown_timeout=10,
)
app.routes.topic(os.environ["TOPIC"], Work)
if os.environ.get("CONSUMING_TTL"):
    app.liveness.configure(consuming_ttl=float(os.environ["CONSUMING_TTL"]))
if os.environ.get("WEB_PREFIX"):
    app.web.enable(
        tracking_interval=0.5,
        topics=WebTopics.prefixed(os.environ["WEB_PREFIX"]),
        commands=False,
    )
