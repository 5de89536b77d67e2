"""Piping forwards messages with their key, payload and headers plus source headers."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from conveyor import Admin, App, Consumer, Message, Producer


def test_piping_keeps_keys_and_adds_source_headers(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    source = new_topic(partitions=3)
    target = new_topic(partitions=3)
    keys = [f"customer-{n}" for n in range(12)]
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        reports = [
            producer.produce_sync(
                topic=source, payload={"n": n}, key=key, headers=[("h", "v")], label=key
            )
            for n, key in enumerate(keys)
        ]
    source_partition = {report.label: report.partition for report in reports}
    done = threading.Event()
    piped: list[int] = []

    class Forwarder(Consumer):
        def consume(self) -> None:
            self.pipe_many_sync(topic=target, messages=list(self.messages))
            piped.extend(m.offset for m in self.messages)
            if len(piped) >= len(keys):
                done.set()

        def enhance_pipe_message(
            self, pipe_message: dict[str, Any], message: Message
        ) -> dict[str, Any]:
            return {
                **pipe_message,
                "headers": [*pipe_message["headers"], ("piped_by", "forwarder")],
            }

    app = App(client_id="pipe", kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"pipe-{uuid.uuid4().hex[:6]}"},
              max_wait_time=0.2)  # fmt: skip
    app.routes.topic(source, Forwarder)
    app.start()
    try:
        assert done.wait(60)
    finally:
        app.stop_and_wait()
    forwarded = read_messages(target, len(keys))
    assert len(forwarded) == len(keys)
    for message in forwarded:
        key = message.key().decode()
        headers = dict(message.headers())
        assert message.partition() == source_partition[key], "same key, same-numbered partition"
        assert headers["h"] == b"v"
        assert headers["source_topic"] == source.encode()
        assert int(headers["source_partition"]) == source_partition[key]
        assert headers["source_offset"].isdigit()
        assert headers["source_consumer_group"].startswith(b"pipe-")
        assert headers["piped_by"] == b"forwarder"


def test_at_least_once_piping_commits_only_what_was_acknowledged(
    kafka_bootstrap: str, new_topic, kafka_admin: Admin
) -> None:
    """``pipe_async(..., at_least_once=True)``: the batch is marked as consumed at once, but
    the offset of a message whose copy the target refuses (too large for it) is not
    committed, neither periodically nor at the stop: it will be read again."""
    source = new_topic()
    target = new_topic(config={"max.message.bytes": "1000"})
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": source, "payload": b"x" * (1500 if n == 2 else 10)} for n in range(5)]
        )
    group = f"pipe-{uuid.uuid4().hex[:6]}"
    failed = threading.Event()
    piped: list[int] = []

    class Forwarder(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                handle = self.pipe_async(topic=target, message=message, at_least_once=True)
                if message.offset < 2:  # acknowledged before the big one goes: the broker
                    handle.wait(30)  # refuses a whole produce batch when one record is too big
                piped.append(message.offset)
            self.mark_as_consumed(self.messages.last)

    app = App(client_id="pipe", kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
              "auto.commit.interval.ms": 100}, max_wait_time=0.1, pause_timeout=0.05)  # fmt: skip
    app.routes.topic(source, Forwarder)
    app.monitor.subscribe(
        "error.occurred",
        lambda event: failed.set() if event["type"] == "consumer.copy.error" else None,
    )
    app.start()
    try:
        assert failed.wait(30), "the oversized copy was refused"
    finally:
        app.stop_and_wait()
    assert piped == [0, 1, 2, 3, 4]
    [lag] = [lag for lag in kafka_admin.read_lags([group]) if lag.topic == source]
    assert lag.committed == 2, "committed up to the copy that was never acknowledged"
