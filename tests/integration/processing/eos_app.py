"""An app for the exactly-once tests: each batch of TOPIC becomes, in one transaction, two
messages per input on OUTPUT (``a`` and ``b``, each carrying the input's ``partition:offset``
in its ``input`` header) and the batch's offset.

Configured by the environment: TOPIC, OUTPUT, GROUP, KAFKA_BOOTSTRAP_SERVERS, SLOW (seconds
to wait between the two outputs of each input, and as long in all after the mark: a kill
then lands inside a transaction, before or after its offset was marked).
Prints ``batch <partition> <first> <last>`` after each committed transaction.
"""

from __future__ import annotations

import os
import sys
import threading

from conveyor import App, Consumer

SLOW = float(os.environ.get("SLOW", "0"))
OUTPUT = os.environ["OUTPUT"]
_pause = threading.Event()  # never set: waits of SLOW seconds without a sleep loop


class Transform(Consumer):
    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                where = f"{message.partition}:{message.offset}".encode()
                self.produce_async(topic=OUTPUT, key=message.key, payload=b"a",
                                   headers=[("input", where)])  # fmt: skip
                if SLOW:
                    _pause.wait(SLOW)
                self.produce_async(topic=OUTPUT, key=message.key, payload=b"b",
                                   headers=[("input", where)])  # fmt: skip
            self.mark_as_consumed(self.messages.last)
            if SLOW:  # still inside: as long again after the mark as before it
                _pause.wait(SLOW * len(self.messages))
        sys.stdout.write(
            f"batch {self.partition} {self.messages[0].offset} {self.messages.last.offset}\n"
        )
        sys.stdout.flush()


app = App(
    client_id="eos",
    kafka={
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": os.environ["GROUP"],
        "session.timeout.ms": 6_000,
        # a killed process's open transaction is aborted by the broker after this long
        "transaction.timeout.ms": 5_000,
    },
    concurrency=2,
    max_messages=20,
    max_wait_time=0.2,
    shutdown_timeout=20,
)
app.routes.topic(os.environ["TOPIC"], Transform)
