"""librdkafka's admin client behind plain-data methods (topics, partitions, cluster metadata).

Each call returns a :class:`~conveyor.driver.handles.FutureHandle` (woken by librdkafka's
future, never polled) or plain values, so no confluent-kafka type leaves the driver.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.admin._scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.cimpl import NewPartitions, NewTopic

from conveyor.driver.clients import LIBRDKAFKA_LOG
from conveyor.driver.consumers import Committed, ConsumerClient, ask_watermarks
from conveyor.driver.credentials import refusal, sliced_metadata
from conveyor.driver.errors import configuration_error, to_conveyor_error
from conveyor.driver.handles import FutureHandle
from conveyor.driver.oauth import prime_token
from conveyor.errors import AuthenticationError, ConfigurationError, KafkaError

__all__ = ["AdminConnection"]

_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's own topics: no consumer group commits offsets for them."""
_RESOURCE = {"topic": ConfigResource.Type.TOPIC, "broker": ConfigResource.Type.BROKER}
_OPERATIONS = {
    "set": AlterConfigOpType.SET,
    "delete": AlterConfigOpType.DELETE,
    "append": AlterConfigOpType.APPEND,
    "subtract": AlterConfigOpType.SUBTRACT,
}


def _source_name(source: Any) -> str:
    """librdkafka gives a config's source as a number: its name (``DEFAULT_CONFIG`` ...)."""
    try:
        return str(ConfigSource(int(source)).name)
    except (ValueError, TypeError):
        return str(getattr(source, "name", source))


class _ClosedAdmin:
    """What a closed connection calls instead of librdkafka's admin client: every call fails."""

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        def closed(*args: Any, **kwargs: Any) -> Any:
            raise KafkaError(f"the admin client is closed ({name} refused)")

        return closed


_CLOSED = _ClosedAdmin()


class AdminConnection:
    """One librdkafka admin client (plus, lazily, a group-less consumer for watermarks)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        self.credentials_refused: AuthenticationError | None = None
        settings = {
            **self._config,
            "logger": self._config.get("logger", LIBRDKAFKA_LOG),
            "error_cb": self._error,
        }
        prime_token(settings)
        try:
            self._admin: Any = AdminClient(settings)
        except (confluent_kafka.KafkaException, ValueError, TypeError) as exc:
            raise configuration_error(exc, "admin client", config) from exc
        self._consumer: Any = None

    def _error(self, error: Any) -> None:
        failure = to_conveyor_error(error, KafkaError, context="librdkafka: ")
        refused = refusal(failure, self._config, "admin client")
        if refused is not None and self.credentials_refused is None:
            self.credentials_refused = refused

    def _refused_now(self) -> AuthenticationError | None:
        """Serve the client's error events and say whether its credentials were refused."""
        if self.credentials_refused is None:
            self._admin.poll(0)
        return self.credentials_refused

    def _handle(self, future: Any, what: str) -> FutureHandle[Any]:
        return FutureHandle(future, what, self._refused_now)

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
        return self._handle(futures[name], f"create topic {name!r}")

    def set_scram_credentials(
        self, user: str, password: str, mechanism: str, iterations: int, timeout: float
    ) -> FutureHandle[None]:
        try:
            kind = ScramMechanism[mechanism.replace("-", "_")]
        except KeyError:
            raise ConfigurationError(
                f"mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512, not {mechanism!r}", "mechanism"
            ) from None
        upsert = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(kind, iterations), password.encode()
        )
        futures = self._admin.alter_user_scram_credentials([upsert], request_timeout=timeout)
        return self._handle(futures[user], f"set the {mechanism} credentials of {user!r}")

    def create_acls(
        self, bindings: Sequence[tuple[str, str, str, str, str, str, str]], timeout: float
    ) -> None:
        """Create ACL bindings, each ``(resource, name, pattern, principal, host, operation,
        permission)`` as Kafka names them (``TOPIC``, ``LITERAL``, ``READ``, ``ALLOW`` ...);
        one that exists already is left as it is."""
        acls = [_acl_binding(*binding) for binding in bindings]
        if not acls:
            return
        futures = self._admin.create_acls(acls, request_timeout=timeout)
        for acl, future in futures.items():
            self._handle(future, f"create ACL {acl}").wait(timeout + 5)

    def describe_acls(
        self, resource: str, name: str | None, timeout: float
    ) -> list[tuple[str, str, str, str, str, str, str]]:
        """The ACL bindings on ``resource`` named ``name`` (``None``: any name), as
        :meth:`create_acls` takes them."""
        anything: Any = None  # the filter's wildcard, where the binding's types say str
        wanted = AclBindingFilter(
            ResourceType[resource],
            anything if name is None else name,
            ResourcePatternType.ANY,
            anything,
            anything,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        found = self._handle(
            self._admin.describe_acls(wanted, request_timeout=timeout), "describe ACLs"
        ).wait(timeout + 5)
        return [
            (
                acl.restype.name,
                acl.name,
                acl.resource_pattern_type.name,
                acl.principal,
                acl.host,
                acl.operation.name,
                acl.permission_type.name,
            )
            for acl in found
        ]

    def delete_topic(self, name: str, timeout: float) -> FutureHandle[None]:
        futures = self._admin.delete_topics(
            [name], operation_timeout=timeout, request_timeout=timeout
        )
        return self._handle(futures[name], f"delete topic {name!r}")

    def create_partitions(self, name: str, total: int, timeout: float) -> FutureHandle[None]:
        futures = self._admin.create_partitions(
            [NewPartitions(name, total)], operation_timeout=timeout, request_timeout=timeout
        )
        return self._handle(futures[name], f"grow topic {name!r} to {total} partitions")

    def metadata(self, topic: str | None, timeout: float) -> dict[str, Any]:
        """Cluster metadata as plain data: ``cluster_id``, ``controller_id``, ``brokers``
        (id -> "host:port"), ``topics`` (name -> {"error", "partitions": {id -> {...}}})."""
        try:
            metadata = sliced_metadata(
                lambda seconds: self._admin.list_topics(topic, timeout=seconds),
                timeout,
                self._refused_now,
            )
        except confluent_kafka.KafkaException as exc:  # the cluster did not answer in time
            raise to_conveyor_error(exc, KafkaError, "cluster metadata: ") from None
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
                    "logger": LIBRDKAFKA_LOG,
                }
            )
        return ask_watermarks(self._consumer, topic, partition, timeout)

    # -- configs --------------------------------------------------------------------------------

    def describe_configs(self, kind: str, name: str, timeout: float) -> list[dict[str, Any]]:
        """Every config entry of a topic or broker as a dict: name, value, default, sensitive,
        read_only, source, synonyms (names and values)."""
        resource = ConfigResource(_RESOURCE[kind], name)
        future = self._admin.describe_configs([resource], request_timeout=timeout)[resource]
        entries = self._handle(future, f"describe {kind} {name} configs").wait(timeout + 5)
        return [
            {
                "name": entry.name,
                "value": entry.value,
                "default": bool(entry.is_default),
                "sensitive": bool(entry.is_sensitive),
                "read_only": bool(entry.is_read_only),
                "source": _source_name(entry.source),
                "synonyms": [(syn.name, syn.value) for syn in (entry.synonyms or {}).values()],
            }
            for entry in sorted(entries.values(), key=lambda item: item.name)
        ]

    def alter_configs(
        self,
        kind: str,
        name: str,
        changes: Mapping[str, tuple[str, str | None]],
        timeout: float,
    ) -> None:
        """Change config entries incrementally: each ``(operation, value)``, the operation
        ``"set"``, ``"delete"`` (back to the default), ``"append"`` or ``"subtract"`` (items
        of a list config, comma-separated)."""
        entries = [
            ConfigEntry(key, value, incremental_operation=_OPERATIONS[operation])
            for key, (operation, value) in changes.items()
        ]
        resource = ConfigResource(_RESOURCE[kind], name, incremental_configs=entries)
        future = self._admin.incremental_alter_configs([resource], request_timeout=timeout)[
            resource
        ]
        self._handle(future, f"alter {kind} {name} configs").wait(timeout + 5)

    # -- consumer groups ------------------------------------------------------------------------

    def list_groups(self, timeout: float) -> list[str]:
        result = self._handle(
            self._admin.list_consumer_groups(request_timeout=timeout), "list consumer groups"
        )
        return sorted(group.group_id for group in result.wait(timeout + 5).valid)

    def describe_group(self, name: str, timeout: float) -> dict[str, Any]:
        future = self._admin.describe_consumer_groups([name], request_timeout=timeout)[name]
        group = self._handle(future, f"describe consumer group {name!r}").wait(timeout + 5)
        return {
            "name": group.group_id,
            "state": str(getattr(group.state, "name", group.state)),
            "members": [
                {
                    "member_id": member.member_id,
                    "client_id": member.client_id,
                    "host": member.host,
                    "assignment": sorted(
                        (tp.topic, tp.partition)
                        for tp in (member.assignment.topic_partitions if member.assignment else [])
                    ),
                }
                for member in group.members
            ],
        }

    def group_offsets(
        self, names: Sequence[str], timeout: float
    ) -> dict[str, dict[tuple[str, int], Committed]]:
        """Committed offsets of each group of ``names``: (topic, partition) -> next offset and
        the metadata committed with it (partitions without one omitted).

        Asked by a consumer client of each group that never joins it, over every partition of
        the cluster's topics (which topics a group committed for is not known beforehand;
        offsets kept for a deleted topic are not seen), not by the admin client's
        ListConsumerGroupOffsets: librdkafka's admin path dereferences a NULL consumer group,
        killing the process, when the answer says the group's coordinator moved
        (confluentinc/librdkafka#5040; a broker restarting), where a consumer client looks
        the coordinator up again. Uncommitted offsets are read, as the admin call did: an
        offset committed inside an open transaction is not waited for (``read_committed``
        asks for stable offsets and waits for the transaction to end).

        Raises:
            AuthenticationError: the credentials were refused.
            KafkaError: the broker did not answer within ``timeout`` (per group).
        """
        try:
            topics = sliced_metadata(
                lambda seconds: self._admin.list_topics(timeout=seconds), timeout, self._refused_now
            ).topics
        except confluent_kafka.KafkaException as exc:
            raise to_conveyor_error(exc, KafkaError, context="read the cluster's topics: ") from exc
        partitions = [
            (topic, partition)
            for topic, found in topics.items()
            if topic not in _INTERNAL_TOPICS
            for partition in found.partitions
        ]
        return {
            name: self._committed(name, partitions, timeout) if partitions else {} for name in names
        }

    def _committed(
        self, name: str, partitions: list[tuple[str, int]], timeout: float
    ) -> dict[tuple[str, int], Committed]:
        """``partitions``' committed offsets for group ``name``, asked in slices of 1, 2, 4 ...
        seconds within ``timeout``, so that refused credentials end the wait early."""
        client = ConsumerClient(
            {
                **{k: v for k, v in self._config.items() if not k.startswith("group.")},
                "group.id": name,
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            deadline = time.monotonic() + timeout
            slice_ = 1.0
            while True:
                try:
                    return client.committed(
                        partitions, max(0.05, min(slice_, deadline - time.monotonic()))
                    )
                except KafkaError as exc:
                    refused = client.refused_now() or self._refused_now()
                    if refused is not None:
                        raise refused from None
                    # only a slice that ran out is asked again (a refusal, say the group's
                    # authorization, is the answer)
                    if exc.name != "_TIMED_OUT" or time.monotonic() >= deadline:
                        raise KafkaError(
                            f"read offsets of group {name!r} failed: {exc}",
                            code=exc.code,
                            name=exc.name,
                            retriable=exc.retriable,
                        ) from exc
                slice_ *= 2
        finally:
            client.close()

    def set_group_offsets(
        self, name: str, offsets: Mapping[tuple[str, int], int], timeout: float
    ) -> None:
        request = ConsumerGroupTopicPartitions(
            name,
            [
                TopicPartition(topic, partition, offset)
                for (topic, partition), offset in offsets.items()
            ],
        )
        future = self._admin.alter_consumer_group_offsets([request], request_timeout=timeout)[name]
        self._handle(future, f"move offsets of group {name!r}").wait(timeout + 5)

    def delete_group(self, name: str, timeout: float) -> None:
        future = self._admin.delete_consumer_groups([name], request_timeout=timeout)[name]
        self._handle(future, f"delete consumer group {name!r}").wait(timeout + 5)

    def offsets_for_time(
        self, partitions: list[tuple[str, int]], milliseconds: int, timeout: float
    ) -> dict[tuple[str, int], int]:
        """The first offset at or after ``milliseconds`` per partition (the high watermark if none)."""
        request = {
            TopicPartition(topic, partition): OffsetSpec.for_timestamp(milliseconds)
            for topic, partition in partitions
        }
        futures = self._admin.list_offsets(request, request_timeout=timeout)
        return {
            (tp.topic, tp.partition): int(
                self._handle(future, "find offsets by time").wait(timeout + 5).offset
            )
            for tp, future in futures.items()
        }

    def _reader(self) -> Any:
        """A consumer that joins no group and commits nothing, for reading by offset."""
        return confluent_kafka.Consumer(
            {
                **{k: v for k, v in self._config.items() if not k.startswith("group.")},
                "group.id": f"conveyor-reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "logger": LIBRDKAFKA_LOG,
            }
        )

    def read(self, topic: str, partition: int, start: int, end: int, timeout: float) -> list[Any]:
        """Raw messages ``start <= offset < end`` of one partition, without a group (bounded by ``timeout``)."""
        consumer = self._reader()
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            messages: list[Any] = []
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and (not messages or messages[-1].offset() < end - 1):
                batch = consumer.consume(
                    min(500, end - start), max(0.0, min(1.0, deadline - time.monotonic()))
                )
                for message in batch:
                    error = message.error()
                    if error is not None:
                        if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                            return messages
                        continue
                    if (message.offset() or 0) < end:
                        messages.append(message)
            return messages
        finally:
            consumer.close()

    def first_timestamps(
        self, positions: list[tuple[str, int, int]], timeout: float
    ) -> dict[tuple[str, int], int | None]:
        """The timestamp (ms) of the message at each ``(topic, partition, offset)``, read with
        one fetch per partition by one group-less consumer (``None`` where none arrived)."""
        found: dict[tuple[str, int], int | None] = {(t, p): None for t, p, _ in positions}
        if not positions:
            return found
        consumer = self._reader()
        try:
            consumer.assign([TopicPartition(t, p, o) for t, p, o in positions])
            waiting = set(found)
            deadline = time.monotonic() + timeout
            while waiting and time.monotonic() < deadline:
                for message in consumer.consume(
                    500, max(0.0, min(0.5, deadline - time.monotonic()))
                ):
                    place = (message.topic(), message.partition())
                    if place not in waiting:
                        continue
                    waiting.discard(place)
                    consumer.pause([TopicPartition(*place)])
                    if message.error() is None:
                        kind, stamp = message.timestamp()
                        found[place] = (
                            stamp if kind != confluent_kafka.TIMESTAMP_NOT_AVAILABLE else None
                        )
            return found
        finally:
            consumer.close()

    def close(self) -> None:
        """Close the watermark consumer and let librdkafka's admin client go: it and this
        connection refer to each other (its error callback), a cycle that would keep its
        threads and sockets until the garbage collector's rare full collections."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = _CLOSED


def _acl_binding(
    resource: str,
    name: str,
    pattern: str,
    principal: str,
    host: str,
    operation: str,
    permission: str,
) -> Any:
    try:
        return AclBinding(
            ResourceType[resource],
            name,
            ResourcePatternType[pattern],
            principal,
            host,
            AclOperation[operation],
            AclPermissionType[permission],
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"not an ACL Kafka takes: {exc}", "acl") from None
