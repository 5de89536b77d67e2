"""An app for the at-least-once state test: counts TOPIC's messages per key in a RocksDB store
(no transaction: the store's writes are flushed to its changelog and the local store every
0.2 s, before the batches' offsets are marked).

Configured by the environment: TOPIC, GROUP, KAFKA_BOOTSTRAP_SERVERS, STATE_DIR and SLOW
(seconds to wait after each message: a kill then lands mid-stream). Prints ``batch <partition>
<first> <last>`` after each batch and ``restored <partition> <records>`` as each partition's
store opens (the records it replayed from the changelog).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from app_env import app_from_env
from conveyor import Consumer
from conveyor.state import Store

SLOW = float(os.environ.get("SLOW", "0"))
_pause = threading.Event()  # never set: waits of SLOW seconds without a sleep loop


class Counts(Consumer):
    def consume(self) -> None:
        counts = self.state
        for message in self.messages:
            counts[message.key] = counts.get(message.key, 0) + 1
            if SLOW:
                _pause.wait(SLOW)
        sys.stdout.write(
            f"batch {self.partition} {self.messages[0].offset} {self.messages.last.offset}\n"
        )
        sys.stdout.flush()


def _restored(event: Any) -> None:
    sys.stdout.write(f"restored {event['partition']} {event['records']}\n")
    sys.stdout.flush()


app = app_from_env(
    f"alo-{os.environ['GROUP']}",  # its own slots (see conveyor.slots)
    concurrency=2,
    max_messages=20,
    shutdown_timeout=20,
    state_dir=os.environ["STATE_DIR"],
    state_flush_interval=0.2,
)
app.routes.topic(os.environ["TOPIC"], Counts, state=Store(backend="rocksdb"))
app.monitor.subscribe("state.restored", _restored)
