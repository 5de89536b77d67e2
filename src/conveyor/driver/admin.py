"""librdkafka's admin client behind plain-data methods (topics, partitions, cluster metadata).

Each call returns a :class:`~conveyor.driver.handles.FutureHandle` (woken by librdkafka's
future, never polled) or plain values, so no confluent-kafka type leaves the driver.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic

from conveyor.driver.clients import LIBRDKAFKA_LOGGER
from conveyor.driver.errors import configuration_error
from conveyor.driver.handles import FutureHandle

__all__ = ["AdminConnection"]


class AdminConnection:
    """One librdkafka admin client (plus, lazily, a group-less consumer for watermarks)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        settings = {**self._config, "logger": self._config.get("logger", LIBRDKAFKA_LOGGER)}
        try:
            self._admin = AdminClient(settings)
        except (confluent_kafka.KafkaException, ValueError, TypeError) as exc:
            raise configuration_error(exc, "admin client", config) from exc
        self._consumer: Any = None

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str],
        timeout: float,
    ) -> FutureHandle[None]:
        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(config),
        )
        futures = self._admin.create_topics(
            [topic], operation_timeout=timeout, request_timeout=timeout
        )
        return FutureHandle(futures[name], f"create topic {name!r}")

    def delete_topic(self, name: str, timeout: float) -> FutureHandle[None]:
        futures = self._admin.delete_topics(
            [name], operation_timeout=timeout, request_timeout=timeout
        )
        return FutureHandle(futures[name], f"delete topic {name!r}")

    def create_partitions(self, name: str, total: int, timeout: float) -> FutureHandle[None]:
        futures = self._admin.create_partitions(
            [NewPartitions(name, total)], operation_timeout=timeout, request_timeout=timeout
        )
        return FutureHandle(futures[name], f"grow topic {name!r} to {total} partitions")

    def metadata(self, topic: str | None, timeout: float) -> dict[str, Any]:
        """Cluster metadata as plain data: ``cluster_id``, ``controller_id``, ``brokers``
        (id -> "host:port"), ``topics`` (name -> {"error", "partitions": {id -> {...}}})."""
        metadata = self._admin.list_topics(topic, timeout=timeout)
        return {
            "cluster_id": metadata.cluster_id,
            "controller_id": metadata.controller_id,
            "brokers": {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()},
            "topics": {
                name: {
                    "error": None if t.error is None else t.error.str(),
                    "error_name": None if t.error is None else t.error.name(),
                    "partitions": {
                        p.id: {
                            "leader": p.leader,
                            "replicas": list(p.replicas),
                            "isrs": list(p.isrs),
                        }
                        for p in t.partitions.values()
                    },
                }
                for name, t in metadata.topics.items()
            },
        }

    def watermarks(self, topic: str, partition: int, timeout: float) -> tuple[int, int]:
        """Low and high watermark offsets, asked of the partition's leader."""
        if self._consumer is None:
            self._consumer = confluent_kafka.Consumer(
                {
                    **{k: v for k, v in self._config.items() if not k.startswith("group.")},
                    "group.id": f"conveyor-admin-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,
                    "logger": LIBRDKAFKA_LOGGER,
                }
            )
        low, high = self._consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=timeout
        )
        return int(low), int(high)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
