"""Running a source task: poll its records, write them to Kafka with the source offsets they
reach, and give a restarted task the last offsets written.

Source offsets live in a compacted topic as Kafka Connect keeps them: key
``["<connector>", {<source partition>}]``, value ``{<source offset>}``, both JSON. Under
exactly-once (``exactly.once.support=requested``, KIP-618) each poll's records and its
offsets are written in one Kafka transaction, with a ``transactional.id`` per connector and
task: a restarted task, wherever it runs, fences the one before it, and what it is given back
is exactly what was committed with the records: no record lost, none written twice."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.admin import Admin
from conveyor.connect.runtime.plugins import SourceOffsets, SourceRecord, SourceTask
from conveyor.connect.runtime.topics import ensure_topic
from conveyor.errors import KafkaError
from conveyor.iterator import Iterator
from conveyor.producer import Producer
from conveyor.serialization import canonical_json, json_dumps

__all__ = ["SourceRunner", "ensure_offsets_topic", "offset_key", "read_offsets"]

_log = logging.getLogger("conveyor.connect")
_POLL = 0.5  # seconds a poll may wait for records: how soon a stop is seen
_READ_TIMEOUT = 120.0


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The offsets topic's key of ``connector``'s source ``partition`` (Kafka Connect's)."""
    return canonical_json([connector, dict(partition)])


def ensure_offsets_topic(kafka: Mapping[str, Any], topic: str, replicas: int | None) -> None:
    """Create the offsets topic (compacted, one partition) unless it exists."""
    with Admin(kafka) as admin:
        ensure_topic(admin, topic, 1, replicas, {"cleanup.policy": "compact"})


def read_offsets(kafka: Mapping[str, Any], topic: str, connector: str) -> SourceOffsets:
    """``connector``'s committed source offsets: the offsets topic read to its end
    (``read_committed``: an aborted transaction's offsets are not seen)."""
    with Admin(kafka) as admin:
        _, end = admin.read_watermark_offsets(topic, 0)
    found: dict[str, Any] = {}
    position = 0
    if end > 0:
        settings = {**kafka, "isolation.level": "read_committed"}
        deadline = time.monotonic() + _READ_TIMEOUT
        with Iterator({topic: {0: "earliest"}}, kafka=settings, yield_nil=True) as reader:
            for message in reader:
                if time.monotonic() > deadline:
                    raise KafkaError(
                        f"the offsets topic {topic} was not read to its end ({end}) within "
                        f"{_READ_TIMEOUT:.0f} s (a transaction left open holds it?)"
                    )
                if message is not None:
                    key = json.loads(message.raw_key or b"null")
                    if isinstance(key, list) and len(key) == 2 and key[0] == connector:
                        raw = message.raw_payload
                        found[canonical_json(key[1]).decode()] = (
                            None if raw is None else json.loads(raw)
                        )
                    position = message.offset + 1
                else:
                    position = reader.position(topic, 0) or 0
                if position >= end:
                    break
    return SourceOffsets({k: v for k, v in found.items() if v is not None})


class SourceRunner:
    """Runs one source task on a thread of its own until :meth:`stop` (see the module)."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        task: SourceTask,
        connector: str,
        task_id: int,
        offsets_topic: str,
        transactional_id: str | None,
        on_crash: Callable[[], None],
        new_topics: tuple[int, int | None] = (1, None),
    ) -> None:
        self.connector = connector
        self.task_id = task_id
        self._task = task
        self._kafka = dict(kafka)
        self._offsets_topic = offsets_topic
        self._transactional_id = transactional_id
        self._on_crash = on_crash
        self._new_topics = new_topics  # partitions, replicas of a topic made for its records
        self._known: set[str] = set()
        self._stopping = threading.Event()
        self.crash: BaseException | None = None
        self._producer: Producer | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"source-{connector}-{task_id}", daemon=True
        )

    def start(self) -> None:
        """Read the committed offsets, start the task and begin polling it.

        Raises:
            Exception: whatever reading the offsets or the task's ``start`` raised.
        """
        settings = dict(self._kafka)
        if self._transactional_id is not None:
            settings["transactional.id"] = self._transactional_id
        self._producer = producer = Producer(settings)
        try:
            if self._transactional_id is not None:
                producer.transactions.initialize()  # fences the task's predecessor first
            offsets = read_offsets(self._kafka, self._offsets_topic, self.connector)
            self._task.start(offsets)
        except BaseException:
            with contextlib.suppress(Exception):
                self._task.stop()
            producer.close(5)
            self._producer = None
            raise
        self._thread.start()

    def _run(self) -> None:
        producer = self._producer
        assert producer is not None
        try:
            while not self._stopping.is_set():
                records = self._task.poll(_POLL)
                if records and not self._stopping.is_set():
                    self._write(producer, records)
                    self._task.committed()
        except BaseException as error:
            self.crash = error
            _log.error(
                "source connector %s task %d failed: %r", self.connector, self.task_id, error
            )
            self._on_crash()
        finally:
            try:
                self._task.stop()
            except Exception:
                _log.exception(
                    "source connector %s task %d did not stop", self.connector, self.task_id
                )

    def _write(self, producer: Producer, records: list[SourceRecord]) -> None:
        self._ensure_topics({record.topic for record in records} - self._known)
        keys: dict[int, bytes] = {}  # a source partition's key, made once per poll
        offsets: dict[bytes, Mapping[str, Any]] = {}  # its last record's offset
        for record in records:
            key = keys.get(id(record.source_partition))
            if key is None:
                key = keys[id(record.source_partition)] = offset_key(
                    self.connector, record.source_partition
                )
            offsets[key] = record.source_offset
        written = [_message(record) for record in records]
        topic = self._offsets_topic
        offset_messages = [
            {"topic": topic, "payload": json_dumps(dict(offset)), "key": key, "partition": 0}
            for key, offset in offsets.items()
        ]
        if self._transactional_id is not None:
            with producer.transaction():  # all or nothing: the commit fails on a failed record
                producer.produce_many_async(written)
                producer.produce_many_async(offset_messages)
        else:  # the records acknowledged first: an offset never gets ahead of its records
            producer.produce_many_sync(written, timeout=60)
            producer.produce_many_sync(offset_messages, timeout=60)

    def _ensure_topics(self, topics: set[str]) -> None:
        """Make the topics records go to that do not exist yet (as Connect's topic creation)."""
        if not topics:
            return
        partitions, replicas = self._new_topics
        with Admin(self._kafka) as admin:
            for topic in sorted(topics):
                ensure_topic(admin, topic, partitions, replicas)
        self._known.update(topics)

    @property
    def trace(self) -> str | None:
        crash = self.crash
        return None if crash is None else "".join(traceback.format_exception(crash))

    def stop(self) -> None:
        """Stop polling (the poll under way ends, its records are written or not at all)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(60)
        if self._producer is not None:
            self._producer.close(30)


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _message(record: SourceRecord) -> dict[str, Any]:
    """A source record as a message to produce (only the fields it sets)."""
    message: dict[str, Any] = {
        "topic": record.topic,
        "payload": _bytes(record.value),
        "key": _bytes(record.key),
    }
    if record.headers:
        message["headers"] = list(record.headers)
    if record.partition is not None:
        message["partition"] = record.partition
    if record.timestamp is not None:
        message["timestamp"] = record.timestamp
    return message
