"""The bare side of bench/scaling.py: one process of a confluent-kafka batch loop in the
group, burning the same 50 µs per message and logging its batches the same way; the same
librdkafka settings as Conveyor's listener. Runs until SIGTERM.

Configured by the environment: KAFKA_BOOTSTRAP_SERVERS, TOPIC, GROUP, OUT_DIR."""

from __future__ import annotations

import os
import signal
import threading

from confluent_kafka import Consumer

from _scaling_work import BatchLog, burn

stopped = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stopped.set())
log = BatchLog()
consumer = Consumer(
    {
        "bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        "group.id": os.environ["GROUP"],
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,  # what Conveyor's listener sets
    }
)
consumer.subscribe([os.environ["TOPIC"]])
try:
    while not stopped.is_set():
        batch = [m for m in consumer.consume(num_messages=500, timeout=0.5) if m.error() is None]
        if batch:
            burn(len(batch))
            log.add(len(batch))
finally:
    consumer.close()
