"""An app without routes whose web UI shows a connect cluster's connectors, for the Connectors
page's browser test (run by `conveyor web`). Configured by the environment:
KAFKA_BOOTSTRAP_SERVERS, WEB_PREFIX (the web topics' prefix) and CONVEYOR_CONNECT_GROUP."""

from __future__ import annotations

import os

from app_env import app_from_env
from conveyor.web import WebTopics

app = app_from_env("connectors-web")
app.web.topics = WebTopics.prefixed(os.environ["WEB_PREFIX"])
