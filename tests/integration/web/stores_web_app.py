"""An app with a state store and the web UI on, for the Stores page's browser test (run by
`conveyor server` and `conveyor web`). Configured by the environment: KAFKA_BOOTSTRAP_SERVERS,
TOPIC, GROUP, WEB_PREFIX (the web topics' prefix) and STATE_DIR."""

from __future__ import annotations

import os

from app_env import app_from_env
from conveyor import Consumer
from conveyor.state import Store
from conveyor.web import WebTopics


class Counts(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            self.state[message.key] = self.state.get(message.key, 0) + 1


app = app_from_env("stores-web", state_dir=os.environ["STATE_DIR"], state_flush_interval=0.2)
app.routes.topic(os.environ["TOPIC"], Counts, state=Store(backend="rocksdb"))
app.web.enable(
    tracking_interval=1.0,
    topics=WebTopics.prefixed(os.environ["WEB_PREFIX"]),
    aggregate=True,
)
