"""The bare confluent-kafka side of ``jobs``: the job layer's floor. The same JSON messages on
a topic of 4 partitions (``$JOBS_QUEUE``); the enqueuer produces each one and waits for its
delivery (``produce`` + ``flush``, as ``enqueue`` waits), the worker is one consumer loop
(a poll that wakes on the first message, then what else arrived) that decodes each message
and records it, committing asynchronously.

``python _jobs_bare.py migrate|steady|fill|worker COUNT [RATE]``."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from _jobs_record import record, steady

BOOTSTRAP = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
TOPIC = f"jobs-{os.environ['JOBS_QUEUE']}"
SETTINGS = {"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True,
            "linger.ms": 0}  # fmt: skip


def payload(enqueued: float) -> bytes:
    return json.dumps({"job": "noop", "args": [enqueued], "kwargs": {}}).encode()


def send(producer: Producer, enqueued: float) -> None:
    """One job, waited for as ``enqueue`` waits for its delivery."""
    producer.produce(TOPIC, payload(enqueued))
    producer.flush(30)


def fill(producer: Producer, count: int) -> None:
    """``count`` jobs at once, delivered in the background."""
    for n in range(count):
        while True:
            try:
                producer.produce(TOPIC, payload(time.time()))
                break
            except BufferError:
                producer.poll(0.01)
        if n % 1000 == 0:
            producer.poll(0)


def main(what: str, count: int, rate: float) -> None:
    if what == "migrate":
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})  # kept until the results came
        futures = admin.create_topics([NewTopic(TOPIC, num_partitions=4, replication_factor=1)])
        for future in futures.values():
            future.result(30)
    elif what in ("steady", "fill"):
        producer = Producer(SETTINGS)
        if what == "steady":
            steady(lambda enqueued: send(producer, enqueued), count, rate)
        else:
            fill(producer, count)
        producer.flush(60)
    else:
        worker()


def worker() -> None:
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": os.environ["JOBS_GROUP"],
                         "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10})  # fmt: skip
    consumer.subscribe([TOPIC])
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    while not stopped.is_set():
        # consume(n, timeout) waits out its timeout until n came: a lone job would wait for
        # it. One poll that wakes on the first message, then what else is there, at once.
        first = consumer.poll(0.5)
        batch = [] if first is None else [first, *consumer.consume(499, 0)]
        for message in batch:
            if message.error() is None:
                record(json.loads(message.value())["args"][0])
        if batch:
            consumer.commit(asynchronous=True)
    consumer.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0,
         float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)  # fmt: skip
