"""An app for the liveness test: its consumer hangs (for HANG seconds) on a message whose
payload is ``hang``; a batch may run CONSUMING_TTL seconds before /healthz says so.

Configured by the environment: TOPIC, GROUP, KAFKA_BOOTSTRAP_SERVERS, HANG, CONSUMING_TTL.
"""

from __future__ import annotations

import os
import threading

from app_env import app_from_env
from conveyor import Consumer

_never = threading.Event()


class MaybeHangs(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            if message.raw_payload == b"hang":
                _never.wait(float(os.environ.get("HANG", "30")))


app = app_from_env("liveness", shutdown_timeout=2)
app.routes.topic(os.environ["TOPIC"], MaybeHangs)
app.liveness.configure(consuming_ttl=float(os.environ.get("CONSUMING_TTL", "1")))
