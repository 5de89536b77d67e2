"""Traffic through the broker before the benchmarks: ``conveyor bench`` runs this first.

A broker that has just started runs its produce and fetch paths interpreted until the JVM has
compiled them, which takes a minute or so of traffic. Measured on 2026-11-25 (bench/rpc.py
right after a broker start): the bare request-reply's p50 was 4.2, 1.3 and 1.1 ms in its
three runs, so run 1 of every variant measured the broker, not the clients (the medians made
Conveyor look 1.04x the bare loop); after 20 s of this script, 0.87, 0.60 and 0.58 ms.

For ``--seconds``: bursts of 1,000 small messages produced and read back, and request-reply
style round trips (one message, flushed, read), on a topic of its own that is deleted after.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

BURST = 1_000
ROUND_TRIPS = 50  # after each burst


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/_warm_up.py", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long (default 30)")
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    args = parser.parse_args()
    console = Console(stderr=True)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    topic = f"bench-warm-up-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer(
        {"bootstrap.servers": args.bootstrap, "linger.ms": 0, "enable.idempotence": True}
    )
    consumer = Consumer(
        {"bootstrap.servers": args.bootstrap, "group.id": topic, "fetch.wait.max.ms": 5}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages = trips = 0
    columns = (TextColumn("warming the broker up"), BarColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("warm-up", total=args.seconds)
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < args.seconds:
                progress.update(task, completed=elapsed)
                for _ in range(BURST):
                    producer.produce(topic, b"x" * 100)
                read = 0
                deadline = time.monotonic() + 30
                while read < BURST and time.monotonic() < deadline:
                    producer.poll(0)
                    read += len(consumer.consume(BURST, 0.1))
                for _ in range(ROUND_TRIPS):
                    producer.produce(topic, b"y")
                    producer.flush(10)
                    while not consumer.consume(1, 0.1) and time.monotonic() < deadline:
                        pass  # bounded by the deadline: the broker answers in a millisecond
                    trips += 1
                messages += read
            progress.update(task, completed=args.seconds)
        if producer.flush(30):
            raise SystemExit("the warm-up's messages were not all delivered")
    finally:
        consumer.close()
        try:
            admin.delete_topics([topic])[topic].result(30)
        except Exception as error:  # the warm-up did its work; its topic is litter
            console.print(f"[yellow]could not delete the warm-up topic {topic}: {error}")
    console.print(f"warmed the broker up: {messages:,} messages, {trips:,} round trips")


if __name__ == "__main__":
    main()
