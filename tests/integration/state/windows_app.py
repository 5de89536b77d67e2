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

from app_env import app_from_env, report_batches
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

report_batches(app)
