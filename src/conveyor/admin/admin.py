"""``Admin``: topics, partitions, watermarks and cluster information, synchronously.

Every call has a timeout and waits on librdkafka's future (no polling); failures come back
as Conveyor's exceptions with librdkafka's code and name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conveyor.admin.acls import Acl
from conveyor.admin.configs import (
    ConfigChange,
    ConfigValue,
    check_changes,
    check_kind,
    shown_value,
    shows,
)
from conveyor.driver.admin import AdminConnection
from conveyor.errors import ConfigurationError, KafkaError
from conveyor.messages import Deserializers, Message

__all__ = [
    "Admin",
    "BrokerInfo",
    "ClusterInfo",
    "ConfigChange",
    "ConfigValue",
    "GroupInfo",
    "GroupMember",
    "Lag",
    "PartitionInfo",
    "PartitionLoad",
    "Replication",
    "TopicInfo",
]

_TIMEOUT = 30.0
CLUSTER_DEFAULT = -1
"""The replication factor that asks for the cluster's ``default.replication.factor`` (KIP-464)."""
REPLICATED_CLUSTER = 3
"""From this many brokers on, a topic with one replica is worth a warning."""


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


@dataclass(frozen=True)
class Replication:
    """What a cluster does about replicas: its broker count and the replication factor it
    gives a topic created without one (``None``: it would not say)."""

    brokers: int
    default_factor: int | None

    def factor(self, wanted: int | None) -> int | None:
        """The replication factor a topic created with ``wanted`` (``None``: the default) gets."""
        return self.default_factor if wanted is None or wanted == CLUSTER_DEFAULT else wanted

    def under_replicated(self, factor: int | None) -> bool:
        """Whether ``factor`` is one replica on a cluster of three or more brokers: a topic that
        loses data with its one broker, and that ``acks=all`` producers cannot write to when
        the cluster's ``min.insync.replicas`` is above 1."""
        return factor == 1 and self.brokers >= REPLICATED_CLUSTER


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group: its state (``STABLE``, ``EMPTY`` ...) and its members."""

    name: str
    state: str
    members: tuple[GroupMember, ...]


@dataclass(frozen=True)
class Lag:
    """How far a group is behind on one partition: ``high_watermark - committed``; for a
    partition the group never committed (``committed is None``), everything from the start
    offset it would use (the low watermark for ``earliest``, the end for ``latest``).
    ``metadata`` is the string committed with the offset (``None``: none, or empty)."""

    group: str
    topic: str
    partition: int
    committed: int | None
    high_watermark: int
    lag: int
    metadata: str | None = None


@dataclass(frozen=True)
class PartitionLoad:
    """One partition's estimated message count, its share of the topic, and how far it is from
    the mean (+0.5 = 50 % above)."""

    partition: int
    messages: int
    share: float
    from_mean: float


def _await(shown: Callable[[], bool]) -> None:
    """The controller accepted a change; wait (bounded, about 8 s) until the broker shows it,
    so that a call right after the change sees it. Kafka sends no notice of that, so this asks
    again after short, growing pauses."""
    pause = threading.Event()
    delay = 0.01
    for _ in range(40):
        if shown():
            return
        pause.wait(delay)  # a retry of a remote read, not a local wait path
        delay = min(0.25, delay * 2)


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
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create ``name`` with ``replication_factor`` replicas of each partition (``None``: the
        cluster's ``default.replication.factor``, as Kafka applies it since KIP-464).

        Raises:
            ConfigurationError: a replication factor below 1 (other than ``None`` or ``-1``,
                Kafka's own word for the cluster's default).
            KafkaError: Kafka refused it (e.g. ``TOPIC_ALREADY_EXISTS``, or more replicas than
                brokers: ``INVALID_REPLICATION_FACTOR``).
        """
        if replication_factor is None or replication_factor == CLUSTER_DEFAULT:
            replicas = CLUSTER_DEFAULT
        elif (
            isinstance(replication_factor, int)
            and not isinstance(replication_factor, bool)
            and replication_factor >= 1
        ):
            replicas = replication_factor
        else:
            raise ConfigurationError(
                f"replication_factor must be None (the cluster's default) or at least 1, got "
                f"{replication_factor!r}",
                "replication_factor",
            )
        self._connection.create_topic(name, partitions, replicas, config or {}, self.timeout).wait(
            self.timeout + 5
        )
        self._await_partitions(name, partitions)

    def replication(self) -> Replication:
        """How many brokers the cluster has and the replication factor a topic created without
        one gets (see :meth:`default_replication_factor`)."""
        cluster = self.cluster_info()
        return Replication(len(cluster.brokers), self.default_replication_factor(cluster))

    def default_replication_factor(self, cluster: ClusterInfo | None = None) -> int | None:
        """The replication factor a topic created without one gets: the
        ``default.replication.factor`` a broker of the cluster reports (the controller, as
        the metadata names it); ``None`` when it would not say (without the ACL to describe
        its configs, say)."""
        cluster = cluster or self.cluster_info()
        if not cluster.brokers:
            return None
        broker = cluster.controller_id if cluster.controller_id >= 0 else cluster.brokers[0].id
        try:
            entry = self.describe_configs("broker", str(broker)).get("default.replication.factor")
            return int(entry.value) if entry is not None and entry.value else None
        except (KafkaError, ValueError):
            return None

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and its data, and wait until the broker no longer lists it (so that it
        can be created again at once). Raises :class:`KafkaError` (``UNKNOWN_TOPIC_OR_PART``)."""
        self._connection.delete_topic(name, self.timeout).wait(self.timeout + 5)
        _await(lambda: name not in self.list_topics(internal=True))

    def create_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions (Kafka cannot shrink a topic)."""
        self._connection.create_partitions(name, total, self.timeout).wait(self.timeout + 5)
        self._await_partitions(name, total)

    def _await_partitions(self, name: str, count: int) -> None:
        """Until the broker's metadata shows ``name`` with ``count`` partitions, each with a
        leader (see :meth:`_await`)."""

        def shown() -> bool:
            topic = self._connection.metadata(name, self.timeout)["topics"].get(name)
            return (
                topic is not None
                and topic["error"] is None
                and len(topic["partitions"]) >= count
                and all(p["leader"] >= 0 for p in topic["partitions"].values())
            )

        _await(shown)

    def list_topics(self, internal: bool = False) -> list[str]:
        """Topic names, sorted; ``internal`` includes ``__consumer_offsets`` and the like."""
        topics = self._connection.metadata(None, self.timeout)["topics"]
        return sorted(name for name in topics if internal or not name.startswith("__"))

    def partition_counts(self) -> dict[str, int]:
        """The partition count of every topic of the cluster (internal ones included), from
        one metadata request; a topic the metadata reports with an error is left out.

        Raises:
            KafkaError: the cluster did not answer within the admin's ``timeout``.
        """
        topics = self._connection.metadata(None, self.timeout)["topics"]
        return {name: len(t["partitions"]) for name, t in topics.items() if t["error"] is None}

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

    # -- configs ------------------------------------------------------------------------------

    def describe_configs(self, kind: str, name: str) -> dict[str, ConfigValue]:
        """Every config entry of a ``"topic"`` or a ``"broker"`` (by id), by name."""
        check_kind(kind)
        return {
            entry["name"]: ConfigValue(**entry)
            for entry in self._connection.describe_configs(kind, str(name), self.timeout)
        }

    def alter_configs(
        self,
        kind: str,
        name: str,
        changes: Mapping[str, str | None] | None = None,
        *,
        append: Mapping[str, str | Sequence[str]] | None = None,
        subtract: Mapping[str, str | Sequence[str]] | None = None,
    ) -> list[ConfigChange]:
        """Change config entries of a ``"topic"`` or a ``"broker"`` (by id) incrementally
        (Kafka's IncrementalAlterConfigs: the entries not named keep their values).
        ``changes`` sets values; ``None`` deletes the override, so the value falls back to the
        broker's or the cluster's default. ``append`` adds items to a list config
        (``cleanup.policy``, ``leader.replication.throttled.replicas`` ...) and ``subtract``
        removes them, each a string (``"compact"``, ``"a,b"``) or a list of strings, leaving
        the list's other items as they are. A broker's dynamic configs
        (``log.cleaner.threads``, ``message.max.bytes``, ``num.io.threads`` ...) change at once,
        without a restart; ``kafka-configs.sh --alter --entity-type brokers`` does the same.
        Returns once the broker describes the new values.

        Example::

            admin.alter_configs("broker", 1, {"log.cleaner.threads": "2"})
            admin.alter_configs("broker", 1, {"log.cleaner.threads": None})  # back to default
            admin.alter_configs("topic", "orders", append={"cleanup.policy": "compact"})

        Returns:
            What changed: each entry's value before and after, and its source now.

        Raises:
            ConfigurationError: nothing to change, a malformed argument, a config the resource
                does not have, one named twice, or a read-only one (a broker's static configs);
                ``setting`` names it.
            KafkaError: Kafka refused a value, or to append to or subtract from a config that
                is not a list (the message names the config).
        """
        check_kind(kind)
        name = str(name)
        before = self.describe_configs(kind, name)
        wanted = check_changes(kind, name, changes, before, append, subtract)
        self._connection.alter_configs(kind, name, wanted, self.timeout)
        after: dict[str, ConfigValue] = {}

        def shown() -> bool:
            after.update(self.describe_configs(kind, name))
            return all(
                key not in after  # per-listener configs are never described
                or shows(after[key], operation, value, kind)
                for key, (operation, value) in wanted.items()
            )

        _await(shown)
        return [
            ConfigChange(
                key,
                shown_value(before.get(key)),
                shown_value(after.get(key)),
                after[key].source if key in after else "UNKNOWN_CONFIG",
            )
            for key in wanted
        ]

    # -- consumer groups ----------------------------------------------------------------------

    def list_consumer_groups(self) -> list[str]:
        return self._connection.list_groups(self.timeout)

    def describe_consumer_group(self, name: str) -> GroupInfo:
        group = self._connection.describe_group(name, self.timeout)
        members = tuple(
            GroupMember(m["member_id"], m["client_id"], m["host"], tuple(m["assignment"]))
            for m in group["members"]
        )
        return GroupInfo(group["name"], group["state"], members)

    def read_lags(
        self, consumer_groups: list[str] | None = None, start: str = "earliest"
    ) -> list[Lag]:
        """Committed offset (with its metadata), high watermark and lag per group, topic and
        partition (sorted).

        Every partition of the group's topics is listed (the topics it committed offsets for
        and those its members are assigned), also partitions the group never committed: there
        the lag counts from ``start``, the offset the group would begin at (``"earliest"``: the
        low watermark, ``"latest"``: the end), so a partition stuck on its first message shows.
        """
        if start not in ("earliest", "latest"):
            raise ConfigurationError(
                f"start must be 'earliest' or 'latest', got {start!r}", "start"
            )
        lags = []
        groups = consumer_groups if consumer_groups is not None else self.list_consumer_groups()
        offsets = self._connection.group_offsets(groups, self.timeout) if groups else {}
        for group in groups:
            committed = offsets[group]
            topics = {topic for topic, _ in committed}
            for member in self.describe_consumer_group(group).members:
                topics.update(topic for topic, _ in member.assignment)
            for topic in sorted(topics):
                for info in self.topic_info(topic).partitions:
                    partition = info.partition
                    low, high = self.read_watermark_offsets(topic, partition)
                    found = committed.get((topic, partition))
                    offset = found.offset if found is not None else None
                    begin = offset if offset is not None else (low if start == "earliest" else high)
                    behind = max(0, high - max(begin, low))
                    metadata = found.metadata if found is not None else None
                    lags.append(Lag(group, topic, partition, offset, high, behind, metadata))
        return lags

    def read_time_lags(self, lags: list[Lag]) -> dict[tuple[str, str, int], float | None]:
        """Time-based lag: for each lag with messages behind, the age in seconds of the oldest
        unconsumed message (the one at the committed offset), read with one fetch per
        partition; ``None`` where nothing is behind or the message could not be read."""
        wanted: dict[tuple[str, int, int], list[tuple[str, str, int]]] = {}
        result: dict[tuple[str, str, int], float | None] = {}
        for lag in lags:
            result[(lag.group, lag.topic, lag.partition)] = None
            if lag.lag > 0:
                offset = (
                    lag.committed if lag.committed is not None else lag.high_watermark - lag.lag
                )
                wanted.setdefault((lag.topic, lag.partition, offset), []).append(
                    (lag.group, lag.topic, lag.partition)
                )
        # one consumer cannot fetch one partition at two offsets: the groups behind the most
        # (the oldest message) go first, the others in later rounds
        now = time.time()
        while wanted:
            round_: dict[tuple[str, int], int] = {}
            for topic, partition, offset in sorted(wanted, key=lambda w: w[2]):
                round_.setdefault((topic, partition), offset)
            stamps = self._connection.first_timestamps(
                [(t, p, o) for (t, p), o in round_.items()], min(self.timeout, 10.0)
            )
            for (topic, partition), offset in round_.items():
                stamp = stamps.get((topic, partition))
                for key in wanted.pop((topic, partition, offset)):
                    result[key] = max(0.0, now - stamp / 1000) if stamp is not None else None
        return result

    def seek_consumer_group(
        self, name: str, positions: Mapping[str, Mapping[int, Any]]
    ) -> dict[tuple[str, int], int]:
        """Move a group's committed offsets: ``{topic: {partition: offset | "earliest" | "latest" |
        datetime}}``. Refused while the group has members (they would overwrite it).

        Returns the offsets written.
        """
        group = self.describe_consumer_group(name)
        if group.members:
            raise KafkaError(
                f"consumer group {name!r} has {len(group.members)} active member(s) (state {group.state}); "
                "stop its consumers before moving its offsets",
                name="GROUP_NOT_EMPTY",
            )
        offsets: dict[tuple[str, int], int] = {}
        for topic, partitions in positions.items():
            for partition, position in partitions.items():
                low, high = self.read_watermark_offsets(topic, partition)
                if position == "earliest":
                    offsets[(topic, partition)] = low
                elif position == "latest":
                    offsets[(topic, partition)] = high
                elif isinstance(position, datetime):
                    if position.tzinfo is None:
                        raise ConfigurationError(
                            "seek times must be timezone-aware datetimes", "position"
                        )
                    found = self._connection.offsets_for_time(
                        [(topic, partition)], int(position.timestamp() * 1000), self.timeout
                    )
                    offset = found[(topic, partition)]
                    offsets[(topic, partition)] = offset if offset >= 0 else high
                elif isinstance(position, int) and not isinstance(position, bool) and position >= 0:
                    offsets[(topic, partition)] = position
                else:
                    raise ConfigurationError(
                        f"seek position for {topic}/{partition} must be an offset, 'earliest', 'latest' or a datetime, "
                        f"got {position!r}",
                        "position",
                    )
        self._connection.set_group_offsets(name, offsets, self.timeout)
        return offsets

    # -- users --------------------------------------------------------------------------------

    def set_scram_credentials(
        self, user: str, password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = 8192
    ) -> None:
        """Create or change the SCRAM credentials ``user`` logs in with (``mechanism``:
        ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``). The password is sent to the broker, which keeps
        only a salted hash.

        Raises:
            ConfigurationError: an unknown mechanism.
            KafkaError: the broker refused (e.g. no SCRAM support, or not authorized).
        """
        self._connection.set_scram_credentials(
            user, password, mechanism, iterations, self.timeout
        ).wait(self.timeout + 5)

    def create_acls(self, acls: Sequence[Acl]) -> None:
        """Create ACL bindings (one that exists already stays as it is; see
        :mod:`conveyor.admin.acls`).

        Raises:
            KafkaError: the broker refused, e.g. without an authorizer (``SECURITY_DISABLED``)
                or without the ALTER permission on the cluster.
        """
        self._connection.create_acls([acl.binding() for acl in acls], self.timeout)

    def describe_acls(self, resource: str, name: str | None = None) -> list[Acl]:
        """The ACL bindings on the ``resource`` (``topic``, ``group`` ...) named ``name``."""
        bindings = self._connection.describe_acls(resource.upper(), name, self.timeout)
        return [
            Acl(
                kind.lower(),
                found,
                principal,
                operation.lower(),
                "",
                pattern.lower(),
                permission.lower(),
                host,
            )
            for kind, found, pattern, principal, host, operation, permission in bindings
        ]

    def delete_consumer_group(self, name: str) -> None:
        self._connection.delete_group(name, self.timeout)

    # -- data ---------------------------------------------------------------------------------

    def read_topic(
        self, topic: str, partition: int, count: int, start_offset: int | None = None
    ) -> list[Message]:
        """Up to ``count`` messages of one partition, in order: from ``start_offset``, or the last
        ``count`` by default. Reads without a consumer group and commits nothing."""
        low, high = self.read_watermark_offsets(topic, partition)
        start = max(low, high - count) if start_offset is None else max(low, start_offset)
        end = min(high, start + count)
        if end <= start:
            return []
        raws = self._connection.read(topic, partition, start, end, self.timeout)
        deserializers = Deserializers()
        return [Message(raw, deserializers) for raw in raws]

    def partition_distribution(self, topic: str) -> list[PartitionLoad]:
        """Estimated messages per partition (from watermarks), share of the total and difference
        from the mean, so that hot and cold partitions stand out."""
        info = self.topic_info(topic)
        counts = []
        for partition in info.partitions:
            low, high = self.read_watermark_offsets(topic, partition.partition)
            counts.append((partition.partition, max(0, high - low)))
        total = sum(count for _, count in counts)
        mean = total / len(counts) if counts else 0.0
        return [
            PartitionLoad(
                partition,
                count,
                count / total if total else 0.0,
                (count - mean) / mean if mean else 0.0,
            )
            for partition, count in counts
        ]

    def message_count(self, topic: str) -> int:
        """Messages ``topic`` holds, estimated from watermarks as :meth:`partition_distribution`
        does (high minus low, summed over its partitions; compaction and transaction markers
        make it an upper bound).

        Raises:
            KafkaError: the topic does not exist, or the cluster did not answer.
        """
        return sum(load.messages for load in self.partition_distribution(topic))

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
