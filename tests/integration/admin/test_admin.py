"""The admin API creates, grows, describes and deletes topics on the real broker, reads
watermarks and describes the cluster; failures keep librdkafka's error names."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Consumer as BareConsumer
from confluent_kafka import TopicPartition

from conveyor import Admin, App, ConfigurationError, Consumer, KafkaError, Producer
from conveyor.admin import ConfigChange
from helpers import running


@pytest.fixture
def admin(kafka_bootstrap: str) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": kafka_bootstrap}) as instance:
        yield instance


def test_topic_lifecycle(admin: Admin) -> None:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions=2, config={"retention.ms": "3600000"})
    try:
        assert name in admin.list_topics()
        assert "__consumer_offsets" not in admin.list_topics()
        info = admin.topic_info(name)
        assert info.partition_count == 2
        assert [p.partition for p in info.partitions] == [0, 1]
        assert all(p.leader >= 0 and p.in_sync_replicas for p in info.partitions)
        with pytest.raises(KafkaError) as raised:
            admin.create_topic(name, partitions=1)
        assert raised.value.name == "TOPIC_ALREADY_EXISTS"
        admin.create_partitions(name, 5)
        assert admin.topic_info(name).partition_count == 5
    finally:
        admin.delete_topic(name)
    with pytest.raises(KafkaError) as missing:
        admin.delete_topic(name)
    assert missing.value.name == "UNKNOWN_TOPIC_OR_PART"


def test_watermarks_follow_what_was_produced(admin: Admin, kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    assert admin.read_watermark_offsets(topic, 0) == (0, 0)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": b"x"} for _ in range(7)])
    assert admin.read_watermark_offsets(topic, 0) == (0, 7)


def test_cluster_info_and_unknown_topics(admin: Admin, kafka_bootstrap: str) -> None:
    cluster = admin.cluster_info()
    assert cluster.cluster_id
    assert any(
        broker.address == kafka_bootstrap.split(",", maxsplit=1)[0] for broker in cluster.brokers
    )
    assert cluster.controller_id in {broker.id for broker in cluster.brokers} | {-1}
    with pytest.raises(KafkaError, match="no-such-topic"):
        admin.topic_info(f"no-such-topic-{uuid.uuid4().hex[:6]}")


def test_the_app_has_an_admin(kafka_bootstrap: str) -> None:
    app = App(client_id="admin-test", kafka={"bootstrap.servers": kafka_bootstrap, "group.id": "x"})
    assert app.admin.cluster_info().brokers
    assert app.admin is app.admin


def test_configs_round_trip_for_a_topic_and_read_a_broker(admin: Admin, new_topic) -> None:
    topic = new_topic(config={"retention.ms": "86400000"})
    configs = admin.describe_configs("topic", topic)
    assert configs["retention.ms"].value == "86400000"
    assert not configs["retention.ms"].default
    assert configs["cleanup.policy"].default
    # where a value comes from, by name (librdkafka gives a number)
    assert (configs["retention.ms"].source, configs["cleanup.policy"].source) == (
        "DYNAMIC_TOPIC_CONFIG",
        "DEFAULT_CONFIG",
    )
    admin.alter_configs(
        "topic", topic, {"retention.ms": "186400000", "max.message.bytes": "2000000"}
    )
    changed = admin.describe_configs("topic", topic)
    assert (changed["retention.ms"].value, changed["max.message.bytes"].value) == (
        "186400000",
        "2000000",
    )
    admin.alter_configs("topic", topic, {"max.message.bytes": None})
    assert admin.describe_configs("topic", topic)["max.message.bytes"].default
    broker = admin.describe_configs("broker", admin.cluster_info().brokers[0].id)
    assert broker["auto.create.topics.enable"].value == "false"
    assert broker["num.io.threads"].read_only is False, "a dynamic broker setting"
    assert broker["node.id"].read_only is True, "fixed when the broker starts"


# Dynamic broker configs that change nothing another test on this shared broker could notice:
# the log cleaner's pause when it has nothing to clean, and how full its buffer gets.
_BACKOFF, _LOAD_FACTOR = "log.cleaner.backoff.ms", "log.cleaner.io.buffer.load.factor"


@pytest.mark.xdist_group("docs")  # see tests/conftest.py
def test_a_dynamic_broker_config_is_altered_incrementally_and_reset(admin: Admin) -> None:
    broker = str(admin.cluster_info().brokers[0].id)
    start = admin.describe_configs("broker", broker)
    backoff = str(int(start[_BACKOFF].value or 0) + 1)
    try:
        set_first = admin.alter_configs("broker", broker, {_LOAD_FACTOR: "0.91"})
        assert set_first == [
            ConfigChange(_LOAD_FACTOR, start[_LOAD_FACTOR].value, "0.91", "DYNAMIC_BROKER_CONFIG")
        ]
        done = admin.alter_configs("broker", broker, {_BACKOFF: backoff})
        assert done == [
            ConfigChange(_BACKOFF, start[_BACKOFF].value, backoff, "DYNAMIC_BROKER_CONFIG")
        ]
        now = admin.describe_configs("broker", broker)
        assert (now[_BACKOFF].value, now[_BACKOFF].source) == (backoff, "DYNAMIC_BROKER_CONFIG")
        assert now[_LOAD_FACTOR].value == "0.91", "the other override is kept (incremental)"
    finally:
        reset = admin.alter_configs("broker", broker, {_BACKOFF: None, _LOAD_FACTOR: None})
    assert [(c.name, c.after) for c in reset] == [
        (_BACKOFF, start[_BACKOFF].value),
        (_LOAD_FACTOR, start[_LOAD_FACTOR].value),
    ]
    back = admin.describe_configs("broker", broker)
    for key in (_BACKOFF, _LOAD_FACTOR):
        assert (back[key].value, back[key].source) == (start[key].value, start[key].source)
        assert back[key].source != "DYNAMIC_BROKER_CONFIG", "the override is gone"


def test_an_unknown_read_only_or_invalid_broker_config_is_refused_and_named(admin: Admin) -> None:
    broker = str(admin.cluster_info().brokers[0].id)
    with pytest.raises(
        ConfigurationError, match=r"did you mean 'log\.cleaner\.backoff\.ms'"
    ) as unknown:
        admin.alter_configs("broker", broker, {"log.cleaner.backof.ms": "1"})
    assert unknown.value.setting == "log.cleaner.backof.ms"
    with pytest.raises(ConfigurationError, match="read-only") as read_only:
        admin.alter_configs("broker", broker, {"node.id": "7"})
    assert read_only.value.setting == "node.id"
    with pytest.raises(KafkaError, match=_BACKOFF):
        admin.alter_configs("broker", broker, {_BACKOFF: "soon"})
    assert admin.describe_configs("broker", broker)[_BACKOFF].source != "DYNAMIC_BROKER_CONFIG"


def test_lags_seek_and_delete_for_a_group(admin: Admin, kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": b"x", "partition": i % 2} for i in range(10)]
        )
    group = f"lagging-{uuid.uuid4().hex[:8]}"
    # A consumer of the group reads part of partition 0, commits, and leaves.
    consumer = BareConsumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list[object] = []
    for _ in range(50):
        read.extend(m for m in consumer.consume(2 - len(read), 0.2) if m.error() is None)
        if len(read) >= 2:
            break
    consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    consumer.close()

    def lags() -> set[tuple[int, int | None, int]]:
        return {
            (lag.partition, lag.committed, lag.lag)
            for lag in admin.read_lags([group])
            if lag.topic == topic
        }

    assert lags() == {(0, 2, 3), (1, None, 5)}, "a partition never committed counts from the start"
    admin.seek_consumer_group(group, {topic: {1: "latest"}})
    assert lags() == {(0, 2, 3), (1, 5, 0)}
    assert group in admin.list_consumer_groups()
    moved = admin.seek_consumer_group(
        group, {topic: {0: "earliest", 1: datetime.now(UTC) + timedelta(hours=1)}}
    )
    assert moved == {(topic, 0): 0, (topic, 1): 5}
    admin.delete_consumer_group(group)
    assert group not in admin.list_consumer_groups()


def test_seek_is_refused_while_the_group_has_members(
    admin: Admin, kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    group = f"active-{uuid.uuid4().hex[:8]}"
    consumer = BareConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    assigned = threading.Event()
    consumer.subscribe([topic], on_assign=lambda _c, _p: assigned.set())
    try:
        for _ in range(100):
            consumer.poll(0.1)
            if assigned.is_set():
                break
        assert assigned.is_set()
        with pytest.raises(KafkaError, match="active member"):
            admin.seek_consumer_group(group, {topic: {0: 0}})
    finally:
        consumer.close()


def test_read_topic_returns_the_last_messages_in_order(
    admin: Admin, kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": {"n": n}} for n in range(20)])
    assert [m.payload["n"] for m in admin.read_topic(topic, 0, 5)] == [15, 16, 17, 18, 19]
    assert [m.offset for m in admin.read_topic(topic, 0, 3, start_offset=4)] == [4, 5, 6]
    assert admin.read_topic(topic, 0, 5, start_offset=20) == []


def test_distribution_shows_a_skewed_topic(admin: Admin, kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=3)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": b"x", "partition": 0} for _ in range(80)]
            + [{"topic": topic, "payload": b"x", "partition": p} for p in (1, 2) for _ in range(10)]
        )
    load = {row.partition: row for row in admin.partition_distribution(topic)}
    assert load[0].messages == 80
    assert load[0].share == pytest.approx(0.8)
    assert load[0].from_mean > 1.0, "partition 0 is hot"
    assert load[1].from_mean < -0.5, "partition 1 is cold"


def test_lags_show_a_partition_stuck_on_its_first_message(
    kafka_bootstrap: str, new_topic, kafka_admin: Admin
) -> None:
    """A partition that fails from its first message never commits; it still shows, with
    everything in it as lag, beside a partition that keeps up."""
    topic = new_topic(partitions=2)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "payload": b"x", "partition": n % 2} for n in range(6)]
        )
    group = f"stuck-{uuid.uuid4().hex[:8]}"

    class FailingOnOne(Consumer):
        def consume(self) -> None:
            if self.partition == 1:
                raise RuntimeError("cannot handle this partition")

    app = App(
        client_id="stuck",
        kafka={
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group,
            "auto.commit.interval.ms": 200,
        },
        max_wait_time=0.2,
        pause_timeout=30.0,
    )
    app.routes.topic(topic, FailingOnOne)

    def lags() -> dict[int, tuple[int | None, int]]:
        return {
            lag.partition: (lag.committed, lag.lag)
            for lag in kafka_admin.read_lags([group])
            if lag.topic == topic
        }

    with running(app):
        deadline = time.monotonic() + 30
        while lags().get(0) != (3, 0) and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the broker's view of the group (bounded), not a wait path
        assert lags() == {0: (3, 0), 1: (None, 3)}


def test_items_are_appended_to_and_subtracted_from_a_list_config(admin: Admin, new_topic) -> None:
    topic = new_topic()
    appended = admin.alter_configs("topic", topic, append={"cleanup.policy": ["compact"]})
    assert appended == [
        ConfigChange("cleanup.policy", "delete", "delete,compact", "DYNAMIC_TOPIC_CONFIG")
    ]
    # set and subtract in one call, each on its own config
    both = admin.alter_configs(
        "topic", topic, {"retention.ms": "3600000"}, subtract={"cleanup.policy": "delete"}
    )
    assert [(change.name, change.after) for change in both] == [
        ("retention.ms", "3600000"),
        ("cleanup.policy", "compact"),
    ]
    assert admin.describe_configs("topic", topic)["cleanup.policy"].value == "compact"
    with pytest.raises(KafkaError, match=r"retention\.ms"):
        admin.alter_configs("topic", topic, append={"retention.ms": "1"})
