"""An app that logs in with a password, for the test that no output shows it. Configured by
the environment: SECURE_BOOTSTRAP (SASL_PLAINTEXT, PLAIN), SECURE_PASSWORD, TOPIC, GROUP and
MARKER (a file touched once a message was consumed)."""

from __future__ import annotations

import os
from pathlib import Path

from conveyor import App, Consumer

PASSWORD = os.environ["SECURE_PASSWORD"]

app = App(
    client_id="secrets",
    kafka={
        "bootstrap.servers": os.environ["SECURE_BOOTSTRAP"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "conveyor",
        "sasl.password": PASSWORD,
        "group.id": os.environ["GROUP"],
        "auto.offset.reset": "earliest",
    },
    max_wait_time=0.2,
)


class Touch(Consumer):
    def consume(self) -> None:
        Path(os.environ["MARKER"]).touch()


# a route with settings of its own, a secret among them
app.routes.topic(os.environ["TOPIC"], Touch, kafka={"sasl.password": PASSWORD})
app.web.enable(tracking_interval=0.5)
