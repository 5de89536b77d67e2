"""``Admin``: topics, partitions, watermarks and cluster information, synchronously.

Every call has a timeout and waits on librdkafka's future (no polling); failures come back
as Conveyor's exceptions with librdkafka's code and name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.driver.admin import AdminConnection
from conveyor.errors import ConfigurationError, KafkaError

__all__ = ["Admin", "BrokerInfo", "ClusterInfo", "PartitionInfo", "TopicInfo"]

_TIMEOUT = 30.0


@dataclass(frozen=True)
class PartitionInfo:
    """One partition: its leader broker id, replicas and in-sync replicas."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    in_sync_replicas: tuple[int, ...]


@dataclass(frozen=True)
class TopicInfo:
    """A topic and its partitions (in partition order)."""

    name: str
    partitions: tuple[PartitionInfo, ...]

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    address: str


@dataclass(frozen=True)
class ClusterInfo:
    """The cluster id, the controller's broker id, and the brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class Admin:
    """Kafka administration (Karafka::Admin): ``app.admin``, or standalone with librdkafka settings.

    Example::

        admin = Admin({"bootstrap.servers": "127.0.0.1:9092"})
        admin.create_topic("orders", partitions=6, config={"retention.ms": "604800000"})
        print(admin.topic_info("orders").partition_count)
    """

    def __init__(self, kafka: Mapping[str, Any], timeout: float = _TIMEOUT) -> None:
        if not isinstance(kafka, Mapping) or not kafka.get("bootstrap.servers"):
            raise ConfigurationError(
                'Admin needs kafka settings with "bootstrap.servers"', "bootstrap.servers"
            )
        self.timeout = timeout
        self._connection = AdminConnection(
            {
                k: v
                for k, v in kafka.items()
                if not k.startswith(("transactional.", "enable.idempotence", "acks"))
            }
        )

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create ``name``. Raises :class:`KafkaError` (e.g. ``TOPIC_ALREADY_EXISTS``)."""
        self._connection.create_topic(
            name, partitions, replication_factor, config or {}, self.timeout
        ).wait(self.timeout + 5)

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and its data. Raises :class:`KafkaError` (``UNKNOWN_TOPIC_OR_PART``)."""
        self._connection.delete_topic(name, self.timeout).wait(self.timeout + 5)

    def create_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka cannot shrink a topic)."""
        self._connection.create_partitions(name, total, self.timeout).wait(self.timeout + 5)

    def list_topics(self, internal: bool = False) -> list[str]:
        """Topic names, sorted; ``internal`` includes ``__consumer_offsets`` and the like."""
        topics = self._connection.metadata(None, self.timeout)["topics"]
        return sorted(name for name in topics if internal or not name.startswith("__"))

    def topic_info(self, name: str) -> TopicInfo:
        """Partitions, leaders and replicas of ``name``.

        Raises:
            KafkaError: the topic does not exist (``UNKNOWN_TOPIC_OR_PART``).
        """
        topic = self._connection.metadata(name, self.timeout)["topics"].get(name)
        if topic is None or topic["error"] is not None:
            reason = "no metadata" if topic is None else topic["error"]
            raise KafkaError(
                f"topic {name!r}: {reason}", name=(topic or {}).get("error_name") or ""
            )
        partitions = tuple(
            PartitionInfo(pid, info["leader"], tuple(info["replicas"]), tuple(info["isrs"]))
            for pid, info in sorted(topic["partitions"].items())
        )
        return TopicInfo(name, partitions)

    # -- offsets ------------------------------------------------------------------------------

    def read_watermark_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(low, high)``: the first offset still stored and the offset the next message gets."""
        return self._connection.watermarks(topic, partition, self.timeout)

    # -- cluster ------------------------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        metadata = self._connection.metadata(None, self.timeout)
        brokers = tuple(
            BrokerInfo(bid, address) for bid, address in sorted(metadata["brokers"].items())
        )
        return ClusterInfo(metadata["cluster_id"], metadata["controller_id"], brokers)

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
