"""The App that the integration tests' subprocess apps (``*_app.py``, run by ``conveyor
server`` or ``conveyor swarm``) build from the environment, in one place."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from conveyor import App


def app_from_env(client_id: str, *, kafka: Mapping[str, Any] | None = None, **settings: Any) -> App:
    """An App on ``$KAFKA_BOOTSTRAP_SERVERS`` in consumer group ``$GROUP`` (when set), whose
    killed members leave the group in 6 s, not 45 (``session.timeout.ms``), and whose
    listeners wait at most 0.2 s for a batch (``max_wait_time``). ``kafka`` and ``settings``
    add to these or replace them; a ``None`` in ``kafka`` removes a default."""
    defaults: dict[str, Any] = {
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "session.timeout.ms": 6_000,
    }
    if os.environ.get("GROUP"):
        defaults["group.id"] = os.environ["GROUP"]
    merged = {
        name: value for name, value in {**defaults, **(kafka or {})}.items() if value is not None
    }
    return App(client_id=client_id, kafka=merged, **{"max_wait_time": 0.2, **settings})
