"""A compacted topic of one partition that every worker reads to its end and then follows:
where the connect workers keep their shared state (configurations, statuses), as Kafka
Connect keeps its config and status topics. A write returns once this worker has read it
back, so what a REST call wrote is what its answer shows."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.admin import Admin
from conveyor.connect.runtime.topics import ensure_topic
from conveyor.errors import KafkaError
from conveyor.iterator import Iterator
from conveyor.producer import Producer
from conveyor.serialization import json_dumps

__all__ = ["TopicLog"]

_log = logging.getLogger("conveyor.connect")

Apply = Callable[[str, Any], None]
"""Called on the log's thread with each record's key and its JSON value (``None``: deleted)."""


class TopicLog:
    """Follows ``topic`` (created compacted with one partition when missing) and hands each
    record to ``apply``; :meth:`write` appends one."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        topic: str,
        apply: Apply,
        *,
        replication_factor: int | None = None,
    ) -> None:
        self.topic = topic
        self._kafka = dict(kafka)
        self._apply = apply
        self._replication_factor = replication_factor
        self._read = threading.Condition()
        self._position = 0  # the offset after the last record applied
        self._failure: BaseException | None = None
        self._iterator: Iterator | None = None
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 60.0, create: bool = True) -> None:
        """Create the topic if needed (unless ``create`` is false), read it to its end, then
        follow it on a thread.

        Raises:
            KafkaError: the topic is missing (``create`` false), could not be created, or was
                not read to its end within ``timeout``.
        """
        with Admin(self._kafka) as admin:
            if not create and self.topic not in admin.list_topics():
                raise KafkaError(f"the topic {self.topic} does not exist")
            ensure_topic(
                admin, self.topic, 1, self._replication_factor, {"cleanup.policy": "compact"}
            )
            _, end = admin.read_watermark_offsets(self.topic, 0)
        self._producer = Producer(self._kafka)
        self._iterator = Iterator(
            {self.topic: {0: "earliest"}},
            kafka={**self._kafka, "isolation.level": "read_committed"},
            yield_nil=True,
            max_wait_time=0.2,
        )
        self._thread = threading.Thread(target=self._follow, name=f"connect-{self.topic}")
        self._thread.daemon = True
        self._thread.start()
        try:
            self._wait_for(end, timeout)
        except BaseException:
            self.stop()  # its thread, reader and producer: nothing left running
            raise

    def write(self, key: str, value: Mapping[str, Any] | None, timeout: float = 30.0) -> None:
        """Append ``key`` = ``value`` (``None``: delete it) and wait until it was read back.

        Raises:
            KafkaError: the record was not written or not read back within ``timeout``.
        """
        assert self._producer is not None, "write() before start()"
        payload = None if value is None else json_dumps(value)
        report = self._producer.produce_sync(
            topic=self.topic, payload=payload, key=key, partition=0, timeout=timeout
        )
        self._wait_for(report.offset + 1, timeout)

    def _wait_for(self, position: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._read:
            while self._position < position and self._failure is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaError(
                        f"{self.topic} was not read up to offset {position} within {timeout} s"
                    )
                self._read.wait(left)
            if self._failure is not None:
                raise KafkaError(f"{self.topic} can no longer be read: {self._failure!r}")

    def _follow(self) -> None:
        iterator = self._iterator
        assert iterator is not None
        try:
            for message in iterator:
                if message is None:
                    continue
                raw = message.raw_payload
                try:
                    self._apply(str(message.key), None if raw is None else json.loads(raw))
                except Exception:
                    _log.exception(
                        "%s: the record at %d was not applied", self.topic, message.offset
                    )
                with self._read:
                    self._position = message.offset + 1
                    self._read.notify_all()
        except BaseException as error:
            _log.exception("%s can no longer be followed", self.topic)
            with self._read:
                self._failure = error
                self._read.notify_all()

    def stop(self) -> None:
        """Stop following; close the clients."""
        if self._iterator is not None:
            self._iterator.stop()
        if self._thread is not None:
            self._thread.join(10)
        if self._iterator is not None:
            self._iterator.close()
        if self._producer is not None:
            self._producer.close()
