"""The admin API creates, grows, describes and deletes topics on the real broker, reads
watermarks and describes the cluster; failures keep librdkafka's error names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from conveyor import Admin, App, KafkaError, Producer


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
    assert any(broker.address == kafka_bootstrap.split(",", maxsplit=1)[0] for broker in cluster.brokers)
    assert cluster.controller_id in {broker.id for broker in cluster.brokers} | {-1}
    with pytest.raises(KafkaError, match="no-such-topic"):
        admin.topic_info(f"no-such-topic-{uuid.uuid4().hex[:6]}")


def test_the_app_has_an_admin(kafka_bootstrap: str) -> None:
    app = App(client_id="admin-test", kafka={"bootstrap.servers": kafka_bootstrap, "group.id": "x"})
    assert app.admin.cluster_info().brokers
    assert app.admin is app.admin
