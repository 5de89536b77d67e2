"""An app for the exactly-once tests: each batch of TOPIC becomes, in one transaction, two
messages per input on OUTPUT (``a`` and ``b``, each carrying the input's ``partition:offset``
in its ``input`` header) and the batch's offset.

Configured by the environment: TOPIC, OUTPUT, GROUP, KAFKA_BOOTSTRAP_SERVERS, SLOW (seconds
to wait between the two outputs of each input, and as long in all after the mark: a kill
then lands inside a transaction, before or after its offset was marked), TRANSACTION_TIMEOUT_MS
(the broker aborts a killed process's open transaction after this long; Kafka's default, 60 s,
unless given) and KILL_AFTER_OFFSETS (a fault injected: the process SIGKILLs itself right after
its Nth transaction added its offsets, so that they are pending in an open transaction).
Prints ``assigned <partitions>`` at each assignment and ``batch <partition> <first> <last>``
after each committed transaction.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from app_env import app_from_env
from conveyor import Consumer
from conveyor.instrumentation import events
from conveyor.producer import transactions

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


app = app_from_env(
    f"eos-{os.environ['GROUP']}",  # its own slots (see conveyor.slots)
    kafka={"transaction.timeout.ms": int(os.environ.get("TRANSACTION_TIMEOUT_MS", "60000"))},
    concurrency=2,
    max_messages=20,
    shutdown_timeout=20,
)
app.routes.topic(os.environ["TOPIC"], Transform)


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _assigned(event: Any) -> None:
    _print("assigned " + " ".join(f"{t}/{p}" for t, p in event["partitions"]))


app.monitor.subscribe(events.REBALANCE_PARTITIONS_ASSIGNED, _assigned)

_KILL_AFTER_OFFSETS = int(os.environ.get("KILL_AFTER_OFFSETS", "0"))
if _KILL_AFTER_OFFSETS:
    _send_offsets = transactions.Transactions.send_offsets
    _sent = [0]

    def _send_offsets_then_die(self: Any, *args: Any, **kwargs: Any) -> None:
        _send_offsets(self, *args, **kwargs)
        _sent[0] += 1
        if _sent[0] >= _KILL_AFTER_OFFSETS:
            _print("killed with offsets in an open transaction")
            os.kill(os.getpid(), signal.SIGKILL)

    transactions.Transactions.send_offsets = _send_offsets_then_die  # type: ignore[method-assign]
