"""Conveyor's example app: create a topic, produce 100,000 messages, consume them back.

`make run` starts the development broker and runs this. It grows as Conveyor's
capabilities land; for now it shows that the broker works end to end and how fast
the wire is on this machine. Producing goes through Conveyor's producer; reading
back uses a bare confluent-kafka consumer until Conveyor's consumers land. Producing goes through Conveyor's producer; reading
back still uses a bare confluent-kafka consumer until Conveyor's consumers land.

    python examples/quickstart.py [--messages N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

import conveyor

TOPIC = "quickstart"


def ensure_topic(bootstrap: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if TOPIC in admin.list_topics(timeout=10).topics:
        return
    future = admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)])
    future[TOPIC].result(timeout=30)


def produce(bootstrap: str, count: int) -> float:
    """Conveyor's producer: bursts of 1,000 orders, then wait for every acknowledgement."""
    with conveyor.Producer({"bootstrap.servers": bootstrap}) as producer:
        started = time.perf_counter()
        bursts = []
        for first in range(0, count, 1_000):
            orders = [
                {"topic": TOPIC, "key": str(index % 100),
                 "payload": {"order": index, "item": "widget", "quantity": index % 7 + 1}}
                for index in range(first, min(first + 1_000, count))
            ]  # fmt: skip
            bursts.append(producer.produce_many_async(orders))
        for burst in bursts:
            burst.wait(60)  # raises BatchDeliveryError if any order was not delivered
        return time.perf_counter() - started


def consume(bootstrap: str, start: dict[int, int], end: dict[int, int]) -> tuple[int, float]:
    """Read exactly the range this run produced, partition by partition, without a group."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "quickstart", "enable.auto.commit": False}
    )
    wanted = {p: end[p] - start[p] for p in end if end[p] > start[p]}
    consumer.assign([TopicPartition(TOPIC, p, start[p]) for p in wanted])
    seen = dict.fromkeys(wanted, 0)
    deadline = time.monotonic() + 60
    started = time.perf_counter()
    try:
        while sum(seen.values()) < sum(wanted.values()) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                if message.error():
                    raise KafkaException(message.error())
                partition = message.partition()
                if partition in seen and message.offset() < end[partition]:
                    seen[partition] += 1
    finally:
        consumer.close()
    return sum(seen.values()), time.perf_counter() - started


def watermarks(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "quickstart-watermarks"})
    try:
        partitions = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in partitions
        }
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    args = parser.parse_args()
    console = Console()

    ensure_topic(args.bootstrap)
    before = watermarks(args.bootstrap)
    produce_seconds = produce(args.bootstrap, args.messages)
    after = watermarks(args.bootstrap)
    consumed, consume_seconds = consume(args.bootstrap, before, after)

    table = Table(
        title=f"Conveyor quickstart — topic {TOPIC!r} on {args.bootstrap}", title_justify="left"
    )
    table.add_column("step")
    table.add_column("messages", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("messages/s", justify="right")
    table.add_row(
        "produce (acks=all, idempotent)",
        f"{args.messages:,}",
        f"{produce_seconds:.2f}",
        f"{args.messages / produce_seconds:,.0f}",
    )
    table.add_row(
        "consume back",
        f"{consumed:,}",
        f"{consume_seconds:.2f}",
        f"{consumed / consume_seconds:,.0f}",
    )
    console.print(table)
    if consumed != args.messages:
        console.print(f"[red]consumed {consumed:,} of {args.messages:,} messages[/]")
        sys.exit(1)


if __name__ == "__main__":
    main()
