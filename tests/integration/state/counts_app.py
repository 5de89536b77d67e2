"""An app for the exactly-once state test: counts TOPIC's messages per key in a RocksDB store
and, in the same transaction as the store's changelog and the batch's offset, produces each
message's running count to OUTPUT (key: the message's key, payload: the count).

Configured by the environment: TOPIC, OUTPUT, GROUP, KAFKA_BOOTSTRAP_SERVERS, STATE_DIR and
SLOW (seconds to wait after each message, inside the transaction: a kill then lands inside
one). Prints ``batch <partition> <first> <last>`` after each committed transaction.
"""

from __future__ import annotations

import os
import sys
import threading

from app_env import app_from_env
from conveyor import Consumer
from conveyor.state import Store

SLOW = float(os.environ.get("SLOW", "0"))
OUTPUT = os.environ["OUTPUT"]
_pause = threading.Event()  # never set: waits of SLOW seconds without a sleep loop


class Counts(Consumer):
    def consume(self) -> None:
        with self.transaction():
            counts = self.state
            for message in self.messages:
                count = counts.get(message.key, 0) + 1
                counts[message.key] = count
                self.produce_async(topic=OUTPUT, key=message.key, payload=b"%d" % count)
                if SLOW:
                    _pause.wait(SLOW)
            self.mark_as_consumed(self.messages.last)
        sys.stdout.write(
            f"batch {self.partition} {self.messages[0].offset} {self.messages.last.offset}\n"
        )
        sys.stdout.flush()


app = app_from_env(
    f"counts-{os.environ['GROUP']}",  # its own slots (see conveyor.slots)
    kafka={"transaction.timeout.ms": 600_000},  # fencing, not the timeout, ends a dead one's
    concurrency=2,
    max_messages=20,
    shutdown_timeout=20,
    state_dir=os.environ["STATE_DIR"],
)
app.routes.topic(os.environ["TOPIC"], Counts, state=Store(backend="rocksdb"))
