"""The producer delivers what it is given, where it is told, in order, and says clearly
when it cannot: every test here reads back from a real broker."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer as BareProducer

from conveyor import (
    BatchDeliveryError,
    DeliveryError,
    DeliveryReport,
    InvalidMessageError,
    Monitor,
    Producer,
    ProducerClosedError,
    ProducerForkedError,
    QueueFullError,
    WaitTimeoutError,
)
from conveyor.producer.partitioners import partitioner_for


@pytest.fixture
def producer(kafka_bootstrap: str) -> Iterator[Producer]:
    with Producer({"bootstrap.servers": kafka_bootstrap}) as instance:
        yield instance


def test_order_within_a_partition_is_kept(producer: Producer, new_topic, read_messages) -> None:
    topic = new_topic(partitions=1)
    handles = [producer.produce_async(topic=topic, payload=str(index)) for index in range(500)]
    offsets = [handle.wait(30).offset for handle in handles]
    assert offsets == sorted(offsets)
    messages = read_messages(topic, 500)
    assert [m.value().decode() for m in messages] == [str(index) for index in range(500)]


def test_sync_report_says_where_the_message_landed(
    producer: Producer, new_topic, read_messages
) -> None:
    topic = new_topic(partitions=3)
    report = producer.produce_sync(topic=topic, payload=b"hello", partition=2, label="order-7")
    assert isinstance(report, DeliveryReport)
    assert (report.topic, report.partition, report.label) == (topic, 2, "order-7")
    assert report.offset == 0
    assert report.timestamp is not None
    assert abs(report.timestamp / 1000 - time.time()) < 60
    [message] = read_messages(topic, 1)
    assert (message.partition(), message.offset(), message.value()) == (2, 0, b"hello")


def test_keys_headers_and_tombstones_round_trip(
    producer: Producer, new_topic, read_messages
) -> None:
    topic = new_topic(partitions=1)
    producer.produce_sync(
        topic=topic,
        payload={"order": 1, "items": ["a", "b"]},
        key="customer-1",
        headers=[("trace", "t1"), ("trace", "t2"), ("blob", b"\x00\xff")],
    )
    producer.produce_sync(topic=topic, payload=None, key=b"customer-1")
    producer.produce_sync(topic=topic, payload="naïve text", headers={"kind": "text"})
    first, tombstone, text = read_messages(topic, 3)
    assert first.key() == b"customer-1"
    assert first.value() == b'{"order":1,"items":["a","b"]}'
    assert first.headers() == [("trace", b"t1"), ("trace", b"t2"), ("blob", b"\x00\xff")]
    assert tombstone.value() is None
    assert tombstone.key() == b"customer-1"
    assert text.value().decode() == "naïve text"
    assert text.headers() == [("kind", b"text")]


def test_partition_key_lands_where_the_key_would(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=6)
    bare = BareProducer({"bootstrap.servers": kafka_bootstrap})
    landed: dict[str, int] = {}
    keys = [f"customer-{index}" for index in range(40)]
    for key in keys:
        bare.produce(
            topic,
            b"x",
            key=key,
            on_delivery=lambda _e, m, k=key: landed.__setitem__(k, m.partition()),
        )
    assert bare.flush(30) == 0
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        reports = [
            producer.produce_sync(topic=topic, payload=b"y", partition_key=key) for key in keys
        ]
    assert [report.partition for report in reports] == [landed[key] for key in keys]
    assert len(set(landed.values())) > 1


@pytest.mark.parametrize("partitioner", ["murmur2_random", "fnv1a_random", "consistent"])
def test_python_partitioners_match_librdkafka(
    kafka_bootstrap: str, new_topic, partitioner: str
) -> None:
    topic = new_topic(partitions=7)
    bare = BareProducer({"bootstrap.servers": kafka_bootstrap, "partitioner": partitioner})
    keys = [f"key-{index}".encode() for index in range(50)] + [b"", b"\xff" * 13]
    landed: dict[bytes, int] = {}
    for key in keys:
        bare.produce(
            topic,
            b"x",
            key=key,
            on_delivery=lambda _e, m, k=key: landed.__setitem__(k, m.partition()),
        )
    assert bare.flush(30) == 0
    choose = partitioner_for(partitioner)
    assert {key: choose(key, 7) for key in keys} == landed


def test_explicit_partition_routing(producer: Producer, new_topic) -> None:
    topic = new_topic(partitions=4)
    reports = producer.produce_many_sync(
        [
            {"topic": topic, "payload": b"p", "partition": index % 4, "label": index}
            for index in range(8)
        ]
    )
    assert sorted((report.label, report.partition) for report in reports) == [
        (i, i % 4) for i in range(8)
    ]


def test_produce_many_delivers_every_message(producer: Producer, new_topic, read_messages) -> None:
    topic = new_topic(partitions=2)
    batch = producer.produce_many_async(
        [
            {"topic": topic, "payload": f"m{index}".encode(), "key": str(index % 2)}
            for index in range(1000)
        ],
        reports=True,
    )
    reports = batch.wait(30)
    assert len(reports) == 1000
    assert len({(r.partition, r.offset) for r in reports}) == 1000
    values = sorted(m.value() for m in read_messages(topic, 1000))
    assert values == sorted(f"m{index}".encode() for index in range(1000))


def test_an_invalid_message_in_a_burst_sends_nothing(
    producer: Producer, new_topic, read_messages
) -> None:
    topic = new_topic(partitions=1)
    with pytest.raises(InvalidMessageError) as raised:
        producer.produce_many_sync(
            [{"topic": topic, "payload": b"ok"}, {"topic": topic, "payload": b"x", "colour": "red"}]
        )
    assert raised.value.field == "colour"
    producer.produce_sync(topic=topic, payload=b"marker")
    assert [m.value() for m in read_messages(topic, 2, timeout=3)] == [b"marker"]


def test_oversized_message_is_refused_before_dispatch(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 10_000}) as producer:
        with pytest.raises(
            InvalidMessageError, match=r"payload is 20,000 bytes, over message.max.bytes"
        ) as raised:
            producer.produce_async(topic=topic, payload=b"x" * 20_000)
        assert raised.value.field == "payload"
        assert len(producer) == 0, "nothing reached librdkafka"


def test_unknown_topic_fails_within_the_message_timeout(kafka_bootstrap: str) -> None:
    with Producer({"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 3000}) as producer:
        started = time.monotonic()
        with pytest.raises(DeliveryError) as raised:
            # A wait of its own: librdkafka fails expired messages on a scan that runs about
            # once a second, so under load the report can come after the default wait (the
            # setting plus MESSAGE_TIMEOUT_MARGIN) has ended in a WaitTimeoutError.
            producer.produce_sync(topic="no-such-topic-anywhere", payload=b"x", timeout=10)
        elapsed = time.monotonic() - started
    assert elapsed < 15
    assert "no-such-topic-anywhere" in str(raised.value)
    assert raised.value.topic == "no-such-topic-anywhere"
    assert raised.value.name in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_MSG_TIMED_OUT")
    assert "does not exist" in str(raised.value), "the error says the topic is missing"
    assert raised.value.persistence == "not_persisted", "written nowhere"
    assert "may have been written" not in str(raised.value), "not both things"


def test_a_default_produce_sync_to_a_missing_topic_raises_the_delivery_error(
    kafka_bootstrap: str, new_topic
) -> None:
    """Without a timeout of its own, produce_sync waits for librdkafka's report, which comes
    up to a second after message.timeout.ms (its scan of expired messages runs once a
    second), and for the check that explains it: the call raises the DeliveryError naming the
    missing topic, never a WaitTimeoutError saying the message may still be delivered. A
    produce right after a report (made on a scan) expires just after a scan: the late case."""
    existing, missing = new_topic(), f"no-such-topic-{uuid.uuid4().hex[:8]}"
    settings = {"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 2000}
    with Producer(settings) as producer:
        assert producer.produce_sync(topic=existing, payload=b"first").offset == 0
        with pytest.raises(DeliveryError):  # its report comes on a scan: the next starts there
            producer.produce_sync(topic=missing, payload=b"x", timeout=10)
        for _ in range(2):
            with pytest.raises(DeliveryError) as raised:
                producer.produce_sync(topic=missing, payload=b"x")
            assert not isinstance(raised.value, WaitTimeoutError)
            assert raised.value.topic == missing
            assert f"{missing!r} does not exist" in str(raised.value)
            assert raised.value.persistence == "not_persisted"


def test_a_burst_to_a_missing_topic_says_so(kafka_bootstrap: str) -> None:
    """Timed out before librdkafka gave up on the topic: every failure names the cause."""
    settings = {"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 2000}
    with Producer(settings) as producer, pytest.raises(BatchDeliveryError) as raised:
        # A wait of its own, as in the test above (librdkafka's once-a-second expiry scan).
        producer.produce_many_sync(
            [{"topic": "no-such-topic-at-all", "payload": b"x"}] * 3, timeout=10
        )
    assert len(raised.value.failures) == 3
    assert all("does not exist" in str(failure) for failure in raised.value.failures)
    assert {failure.persistence for failure in raised.value.failures} == {"not_persisted"}


def test_wait_timeout_is_a_monotonic_deadline(kafka_bootstrap: str) -> None:
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        handle = producer.produce_async(topic="no-such-topic-either", payload=b"x")
        started = time.monotonic()
        with pytest.raises(WaitTimeoutError):
            handle.wait(0.3)
        assert 0.25 <= time.monotonic() - started < 2
        assert not handle.done()
        assert producer.close(timeout=0.5) == 1, "close reports the undelivered message"
    with pytest.raises(DeliveryError, match="delivery to 'no-such-topic-either' failed"):
        handle.result()


def test_middleware_changes_and_rejects_messages(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()

    def stamp(message: dict) -> dict:
        return {**message, "headers": [("stamped", "yes")]}

    def reject_secrets(message: dict) -> None:
        if message.get("key") == "secret":
            raise InvalidMessageError("secret keys are not allowed", "key")

    with Producer(
        {"bootstrap.servers": kafka_bootstrap}, middleware=[stamp, reject_secrets]
    ) as producer:
        producer.produce_sync(topic=topic, payload=b"one")
        with pytest.raises(InvalidMessageError, match="secret"):
            producer.produce_sync(topic=topic, payload=b"two", key="secret")
        producer.middleware.append(
            lambda message: {**message, "payload": message["payload"] + b"!"}
        )
        producer.produce_many_sync([{"topic": topic, "payload": b"three"}])
    messages = read_messages(topic, 2)
    assert [m.value() for m in messages] == [b"one", b"three!"]
    assert all(m.headers() == [("stamped", b"yes")] for m in messages)


def test_monitor_sees_every_step(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    monitor = Monitor()
    seen: list[tuple[str, object]] = []
    monitor.subscribe("*", lambda event: seen.append((event.name, event.get("label"))))
    with Producer({"bootstrap.servers": kafka_bootstrap}, monitor=monitor) as producer:
        producer.produce_sync(topic=topic, payload=b"a", label="L1")
        producer.produce_many_sync([{"topic": topic, "payload": b"b", "label": "L2"}])
    names = [name for name, _ in seen]
    for expected in (
        "message.produced_async",
        "message.acknowledged",
        "message.produced_sync",
        "messages.produced_async",
        "messages.produced_sync",
        "producer.closed",
    ):
        assert expected in names
    assert ("message.acknowledged", "L1") in seen
    assert ("message.acknowledged", "L2") in seen


def test_concurrent_sync_callers_each_get_their_own_report(producer: Producer, new_topic) -> None:
    topic = new_topic(partitions=1)
    results: dict[int, list[int]] = {}

    def call(thread: int) -> None:
        results[thread] = [
            producer.produce_sync(
                topic=topic, payload=f"{thread}-{i}".encode(), label=(thread, i)
            ).offset
            for i in range(50)
        ]

    threads = [threading.Thread(target=call, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    offsets = [offset for values in results.values() for offset in values]
    assert len(offsets) == 400
    assert len(set(offsets)) == 400
    assert all(values == sorted(values) for values in results.values())


def test_close_flushes_is_idempotent_and_refuses_later_use(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    handles = [producer.produce_async(topic=topic, payload=b"x") for _ in range(100)]
    assert producer.close() == 0
    assert all(handle.done() and handle.error() is None for handle in handles)
    assert producer.close() == 0
    assert producer.closed
    with pytest.raises(ProducerClosedError):
        producer.produce_sync(topic=topic, payload=b"late")
    with pytest.raises(ProducerClosedError):
        producer.produce_many_async([{"topic": topic, "payload": b"late"}])
    assert len(read_messages(topic, 100)) == 100


def test_a_producer_inherited_across_fork_refuses_to_run(producer: Producer, new_topic) -> None:
    topic = new_topic()
    producer.produce_sync(topic=topic, payload=b"parent")
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code only
        try:
            producer.produce_sync(topic=topic, payload=b"child")
            code = 1
        except ProducerForkedError as error:
            code = 0 if "fork" in str(error) else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert producer.produce_sync(topic=topic, payload=b"parent again").offset == 1


def test_a_full_queue_raises_queue_full_error_after_its_timeout(
    kafka_bootstrap: str, new_topic
) -> None:
    """librdkafka's queue holds one message (lingering 1.5 s): the next produce waits
    ``queue_full_timeout`` for room and then raises, saying what to change."""
    topic = new_topic()
    settings = {"bootstrap.servers": kafka_bootstrap, "queue.buffering.max.messages": 1,
                "linger.ms": 1500}  # fmt: skip
    with Producer(settings, queue_full_timeout=0.2) as producer:
        first = producer.produce_async(topic=topic, payload=b"waits in the queue")
        with pytest.raises(QueueFullError, match=r"queue\.buffering\.max\.messages"):
            producer.produce_async(topic=topic, payload=b"no room")
        assert first.wait(30).offset == 0, "the queued message is still delivered"


def test_messages_failed_at_close_are_reported_as_purged(kafka_bootstrap: str) -> None:
    """A message still queued when ``close()`` gives up (its topic does not exist, so it
    waits for metadata) is failed with a purge error and reported as ``message.purged``
    (with its label), not as a delivery error."""
    monitor = Monitor()
    purged: list[object] = []
    errors: list[object] = []
    monitor.subscribe("message.purged", lambda event: purged.append(event["label"]))
    monitor.subscribe("error.occurred", lambda event: errors.append(event["type"]))
    producer = Producer({"bootstrap.servers": kafka_bootstrap}, monitor=monitor)
    handle = producer.produce_async(topic="no-such-topic-to-purge", payload=b"x", label="order-7")
    assert producer.close(timeout=0.1) == 1
    with pytest.raises(DeliveryError):
        handle.result()
    assert purged == ["order-7"]
    assert errors == []
