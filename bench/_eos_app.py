"""The exactly-once copy that bench/eos_recovery.py kills and restarts.

Each batch of TOPIC is copied to OUTPUT in one transaction with its offset. With
KILL_AFTER_OFFSETS=N the process SIGKILLs itself right after its Nth transaction added its
offsets (so that they are pending in an open transaction, which the broker keeps for
transaction.timeout.ms, 60 s by default). With UNFENCED=1 each process gets an instance_id of
its own, as every process had before the slot's stable transactional.id: nothing then fences
the crashed predecessor's transaction. Prints ``batch <partition> <first> <last>`` per commit.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from conveyor import App, Consumer
from conveyor.producer import transactions

OUTPUT = os.environ["OUTPUT"]


class Copy(Consumer):
    def consume(self) -> None:
        with self.transaction():
            for message in self.messages:
                self.produce_async(topic=OUTPUT, key=message.key, payload=message.raw_payload)
            self.mark_as_consumed(self.messages.last)
        last = self.messages.last.offset
        sys.stdout.write(f"batch {self.partition} {self.messages[0].offset} {last}\n")
        sys.stdout.flush()


app = App(
    client_id=f"eos-recovery-{os.environ['GROUP']}",
    kafka={
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": os.environ["GROUP"],
        "session.timeout.ms": 6_000,
    },
    concurrency=3,
    max_messages=200,
    max_wait_time=0.2,
    instance_id=f"process-{os.getpid()}" if os.environ.get("UNFENCED") else None,
)
app.routes.topic(os.environ["TOPIC"], Copy)

_KILL_AFTER_OFFSETS = int(os.environ.get("KILL_AFTER_OFFSETS", "0"))
if _KILL_AFTER_OFFSETS:
    _send_offsets = transactions.Transactions.send_offsets
    _sent = [0]

    def _send_offsets_then_die(self: Any, *args: Any, **kwargs: Any) -> None:
        _send_offsets(self, *args, **kwargs)
        _sent[0] += 1
        if _sent[0] >= _KILL_AFTER_OFFSETS:
            os.kill(os.getpid(), signal.SIGKILL)

    transactions.Transactions.send_offsets = _send_offsets_then_die  # type: ignore[method-assign]
