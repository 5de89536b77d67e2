"""An app for the ``conveyor connect`` tests: TOPIC broadcast by key, a webhook route beside it
(not run by ``connect broadcast``). Configured by TOPIC and KAFKA_BOOTSTRAP_SERVERS."""

from __future__ import annotations

import os
import uuid

from app_env import app_from_env
from conveyor.connect.sinks import Broadcast, Webhook

app = app_from_env(
    "broadcaster",
    kafka={"group.id": f"broadcaster-{uuid.uuid4().hex[:8]}", "session.timeout.ms": None},
)
app.routes.sink(os.environ["TOPIC"], Broadcast(), lanes=16)
app.routes.sink(f"{os.environ['TOPIC']}-hooks", Webhook("http://127.0.0.1:9/none"), lanes=2)
