"""An app for the exactly-once window test: counts TOPIC's messages per key in 1 s tumbling
windows (the messages' own timestamps) and sends each closed window to OUTPUT, in one
transaction with the window store's changelog and the offset (a route's ``window=``, no
consumer code).

Configured by the environment: TOPIC, OUTPUT, GROUP, KAFKA_BOOTSTRAP_SERVERS, STATE_DIR and
SLOW (seconds each batch's worker waits after it: the input lasts long enough for the kills).
Prints ``batch <partition>`` after each batch.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from app_env import app_from_env
from conveyor.instrumentation import events
from conveyor.state import Tumbling

app = app_from_env(
    f"windows-{os.environ['GROUP']}",  # its own slots (see conveyor.slots)
    kafka={"transaction.timeout.ms": 600_000},
    concurrency=2,
    max_messages=50,
    shutdown_timeout=20,
    state_dir=os.environ["STATE_DIR"],
)
app.routes.topic(
    os.environ["TOPIC"], window=Tumbling(1).count().to(os.environ["OUTPUT"], exactly_once=True)
)


SLOW = float(os.environ.get("SLOW", "0"))
_pause = threading.Event()  # never set: waits of SLOW seconds without a sleep loop


def _batch(event: Any) -> None:
    sys.stdout.write(f"batch {event['partition']}\n")
    sys.stdout.flush()
    if SLOW:
        _pause.wait(SLOW)


app.monitor.subscribe(events.CONSUMER_CONSUMED, _batch)
