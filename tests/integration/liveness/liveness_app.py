"""An app for the liveness test: its consumer hangs (for HANG seconds) on a message whose
payload is ``hang``; a batch may run CONSUMING_TTL seconds before /healthz says so.

Configured by the environment: TOPIC, GROUP, KAFKA_BOOTSTRAP_SERVERS, HANG, CONSUMING_TTL.
"""

from __future__ import annotations

import os
import threading

from conveyor import App, Consumer

_never = threading.Event()


class MaybeHangs(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            if message.raw_payload == b"hang":
                _never.wait(float(os.environ.get("HANG", "30")))


app = App(
    client_id="liveness",
    kafka={
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": os.environ["GROUP"],
        "session.timeout.ms": 6_000,
    },
    max_wait_time=0.2,
    shutdown_timeout=2,
)
app.routes.topic(os.environ["TOPIC"], MaybeHangs)
app.liveness.configure(consuming_ttl=float(os.environ.get("CONSUMING_TTL", "1")))
