"""The App that the integration tests' subprocess apps (``*_app.py``, run by ``conveyor
server`` or ``conveyor swarm``) build from the environment, in one place."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from conveyor import App
from conveyor.instrumentation import events


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


def report_batches(app: App) -> None:
    """Print ``batch <partition>`` after each batch of ``app`` and then wait ``$SLOW`` seconds
    (so that an input lasts long enough for a test's kills to land mid-stream)."""
    slow = float(os.environ.get("SLOW", "0"))
    pause = threading.Event()  # never set: waits of SLOW seconds without a sleep loop

    def batch(event: Any) -> None:
        sys.stdout.write(f"batch {event['partition']}\n")
        sys.stdout.flush()
        if slow:
            pause.wait(slow)

    app.monitor.subscribe(events.CONSUMER_CONSUMED, batch)
