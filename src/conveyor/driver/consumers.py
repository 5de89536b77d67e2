"""The librdkafka consumer, behind a small interface that speaks (topic, partition) tuples.

Only this module knows confluent-kafka's consumer types; the processing part sees raw
messages through :mod:`conveyor.messages` and partitions as ``(topic, partition)`` pairs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import confluent_kafka
from confluent_kafka import KafkaException, TopicPartition

from conveyor.driver.clients import LIBRDKAFKA_LOG
from conveyor.driver.connection import ConnectionNews, ConnectionWatch
from conveyor.driver.consumer_wake import consumer_wake
from conveyor.driver.credentials import refusal, sliced_metadata
from conveyor.driver.errors import ErrorCode, configuration_error, is_error, to_conveyor_error
from conveyor.driver.oauth import prime_token
from conveyor.errors import AuthenticationError, KafkaError

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_STORED",
    "PARTITION_EOF",
    "CommitRefused",
    "Committed",
    "ConsumerClient",
    "Partition",
    "offset_with_metadata",
    "raw_error",
    "raw_partition",
    "raw_topic",
]

Partition = tuple[str, int]
"""A topic partition as ``(topic, partition)``."""

OFFSET_STORED = confluent_kafka.OFFSET_STORED
OFFSET_BEGINNING = confluent_kafka.OFFSET_BEGINNING
OFFSET_END = confluent_kafka.OFFSET_END
PARTITION_EOF = ErrorCode._PARTITION_EOF

RebalanceCallback = Callable[[list[Partition]], None]
CommitRefused = Callable[[list[tuple[str, int, int]], KafkaError, bool], None]
"""Told of a commit the group refused: its ``(topic, partition, next offset)``s, the error,
and whether the commit was synchronous."""


class Committed(NamedTuple):
    """A partition's committed offset (the next one to read) and the metadata string
    committed with it (``None``: none, or empty)."""

    offset: int
    metadata: str | None


# librdkafka's message accessors as plain functions, for C-level passes over a whole poll
# (``map(raw_partition, batch)``): measured 2.4x cheaper per message than a Python loop
# calling the methods, and 5x cheaper than operator.methodcaller (a lookup per call).
raw_error: Callable[[Any], Any] = confluent_kafka.Message.error
raw_topic: Callable[[Any], Any] = confluent_kafka.Message.topic
raw_partition: Callable[[Any], Any] = confluent_kafka.Message.partition

_log = logging.getLogger("conveyor.driver")

_DRAIN_CHUNK = 500
# A first message that took longer than this came after a wait (see poll_batch).
_WAITED = 0.000_2
_clock = time.perf_counter


# Answers a partition's leader gives while it is being elected (right after the topic was
# created, or during a leader change): worth asking again within the caller's timeout.
_LEADERLESS = frozenset(
    {
        confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION,
        confluent_kafka.KafkaError.LEADER_NOT_AVAILABLE,
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)


def offset_with_metadata(
    topic: str, partition: int, offset: int, metadata: str | None
) -> TopicPartition:
    """A partition's offset to commit, with its metadata string (confluent-kafka refuses
    ``metadata=None``: none is left out)."""
    if metadata is None:
        return TopicPartition(topic, partition, offset)
    return TopicPartition(topic, partition, offset, metadata=metadata)


def ask_watermarks(consumer: Any, topic: str, partition: int, timeout: float) -> tuple[int, int]:
    """Low and high watermarks of ``topic``/``partition``, asked of its leader, asking again
    (after short, growing pauses, until ``timeout``) while the partition has none yet."""
    deadline = time.monotonic() + timeout
    pause, delay = threading.Event(), 0.01
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(0.1, deadline - time.monotonic())
            )
            return int(low), int(high)
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code not in _LEADERLESS or time.monotonic() + delay >= deadline:
                raise to_conveyor_error(
                    exc, KafkaError, f"watermarks of {topic}/{partition}: "
                ) from None
        pause.wait(delay)  # a retry of a remote read, not a local wait path
        delay = min(0.25, delay * 2)


class ConsumerClient:
    """One librdkafka consumer. Methods other than :meth:`poll` and :meth:`drain` may be
    called from any thread (librdkafka's consumer API is thread-safe); rebalance callbacks
    run on the thread that polls."""

    def __init__(
        self,
        config: Mapping[str, Any],
        on_error: Callable[[KafkaError], None] | None = None,
        on_fetch_error: Callable[[KafkaError], None] | None = None,
        on_connection: Callable[[ConnectionNews], None] | None = None,
        on_statistics: Callable[[str], None] | None = None,
        on_commit_refused: CommitRefused | None = None,
        wakeable: bool = False,
    ) -> None:
        self._on_fetch_error = on_fetch_error
        self._on_error = on_error
        self._on_commit_refused = on_commit_refused
        self._config = config
        self.credentials_refused: AuthenticationError | None = None
        """Set when Kafka refused this client's credentials; polls then raise it."""
        self._watch = (
            ConnectionWatch(str(config.get("client.id", "consumer")), on_connection)
            if on_connection is not None
            else None
        )
        settings = dict(config)
        settings.setdefault("logger", LIBRDKAFKA_LOG)
        settings["error_cb"] = self._error  # refused credentials are always watched for
        if on_statistics is not None and "statistics.interval.ms" in config:
            settings["stats_cb"] = on_statistics
        if on_commit_refused is not None:  # the outcome of asynchronous commits
            settings["on_commit"] = self._committed
        prime_token(settings)
        try:
            self._consumer = confluent_kafka.Consumer(settings)
        except (KafkaException, ValueError, TypeError) as exc:
            raise configuration_error(exc, "consumer", config) from exc
        self._consume = self._consumer.consume
        self._watermark_keys: dict[Partition, TopicPartition] = {}
        self._wake = consumer_wake(self._consumer) if wakeable else None

    @property
    def wakeable(self) -> bool:
        """Whether :meth:`wake` ends a poll's wait (see :mod:`conveyor.driver.consumer_wake`)."""
        return self._wake is not None

    def wake(self) -> None:
        """From any thread: the poll in progress returns now (the next one at once if none
        waits), when the client is ``wakeable``; else nothing happens."""
        if self._wake is not None:
            self._wake.wake()

    def _error(self, error: Any) -> None:
        failure = to_conveyor_error(error, KafkaError, context="librdkafka: ")
        refused = refusal(failure, self._config, "consumer")
        if refused is not None:
            if self.credentials_refused is None:  # told once, and raised by the next poll
                self.credentials_refused = refused
                if self._on_error is not None:
                    self._on_error(refused)
            return
        if self._watch is not None and self._watch.error(failure):
            return  # a lost connection is told once by the watch, not per reconnect
        if self._on_error is not None:
            self._on_error(failure)

    def _committed(self, error: Any, partitions: list[TopicPartition]) -> None:
        """librdkafka's report of an asynchronous commit (served in a poll: what it raises
        would come out of the poll, so it is logged instead)."""
        try:
            self._refused(error, partitions, sync=False)
        except Exception:
            _log.exception("reporting a refused commit failed")

    def _refused(self, error: Any, partitions: list[TopicPartition], sync: bool) -> bool:
        """Tell ``on_commit_refused`` of the partitions a commit failed for (all of them
        when ``error`` is the whole commit's); True when there were some."""
        if is_error(error) and error.code() == ErrorCode._NO_OFFSET:
            return False  # nothing to commit is not a failure
        failed = [tp for tp in partitions if error is not None or tp.error is not None]
        if not failed:
            return False
        cause = error if error is not None else failed[0].error
        if self._on_commit_refused is not None:
            offsets = [(tp.topic, tp.partition, tp.offset) for tp in failed]
            where = ", ".join(f"{t}/{p}" for t, p, _ in offsets)
            failure = to_conveyor_error(cause, KafkaError, f"commit of {where} refused: ")
            self._on_commit_refused(offsets, failure, sync)
        return True

    def _connection_check(self, answered: bool) -> None:
        """While the connection is down: a fetched message says it is back; without one, a
        metadata request every few seconds asks."""
        watch = self._watch
        assert watch is not None
        if answered:
            watch.alive()
        elif watch.probe_due():
            try:
                self._consumer.list_topics(timeout=1.0)
            except KafkaException:
                return
            watch.alive()

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback,
        on_revoke: RebalanceCallback,
        on_lost: RebalanceCallback,
    ) -> None:
        def assigned(_consumer: Any, partitions: list[TopicPartition]) -> None:
            on_assign([(tp.topic, tp.partition) for tp in partitions])

        def revoked(_consumer: Any, partitions: list[TopicPartition]) -> None:
            on_revoke([(tp.topic, tp.partition) for tp in partitions])

        def lost(_consumer: Any, partitions: list[TopicPartition]) -> None:
            on_lost([(tp.topic, tp.partition) for tp in partitions])

        self._consumer.subscribe(topics, on_assign=assigned, on_revoke=revoked, on_lost=lost)

    def assign(self, partitions: Iterable[tuple[str, int, int]], incremental: bool = False) -> None:
        """Start reading ``(topic, partition, start offset)``s: a direct assignment, or inside
        an assignment callback the group's (``incremental`` under a cooperative protocol, which
        adds to what is assigned instead of replacing it)."""
        chosen = [TopicPartition(t, p, o) for t, p, o in partitions]
        if incremental:
            self._consumer.incremental_assign(chosen)
        else:
            self._consumer.assign(chosen)

    def committed(
        self, partitions: Iterable[Partition], timeout: float
    ) -> dict[Partition, Committed]:
        """The group's committed offsets of ``partitions``, each with the metadata committed
        with it; a partition the group never committed has none (it is missing from the
        result).

        Under ``isolation.level=read_committed`` (librdkafka's default) the broker answers only
        once no open transaction holds an offset of them (KIP-447), so this waits for such a
        transaction to end, up to ``timeout``.

        Raises:
            KafkaError: the broker did not answer in time, or refused (the error names it): the
                committed offsets are unknown, which is not the same as none.
        """
        asked = [TopicPartition(t, p) for t, p in partitions]
        try:
            found = self._consumer.committed(asked, timeout=timeout)
        except KafkaException as exc:
            raise to_conveyor_error(exc, KafkaError, "committed offsets: ") from None
        except RuntimeError as exc:  # confluent-kafka's "Consumer closed"
            raise KafkaError(f"committed offsets: {exc}", name="_DESTROY") from None
        offsets: dict[Partition, Committed] = {}
        for tp in found:
            if tp.error is not None:
                raise to_conveyor_error(
                    tp.error, KafkaError, f"committed offset of {tp.topic}/{tp.partition}: "
                )
            if tp.offset >= 0:
                offsets[(tp.topic, tp.partition)] = Committed(tp.offset, tp.metadata or None)
        return offsets

    def poll_batch(self, timeout: float, limit: int) -> list[Any]:
        """Block up to ``timeout`` for the first message; if it was there at once, also take
        what librdkafka already holds, without waiting, up to ``limit`` messages (one that
        came after a wait is returned alone: a lone message goes on at once).

        (``consume(1, timeout)`` and then chunks of ``consume(n, 0)``: measured 8x faster than
        ``poll()`` followed by one large ``consume(n, 0)``, which leaves fetched data waiting.)
        """
        consume = self._consume
        clock = _clock
        began = clock()
        batch = consume(1, timeout)
        if self.credentials_refused is not None:
            raise self.credentials_refused
        watch = self._watch
        if watch is not None and watch.down_since is not None:
            self._connection_check(bool(batch) and batch[0].error() is None)
        if not batch or clock() - began > _WAITED:
            # Nothing, or a message that came after a wait: it is alone but for a burst
            # fetched with it, which the next poll takes at once (and drains). Asking for more
            # now cost a lone message's path ~10 us in place (a call into librdkafka just
            # after it woke this thread; ~1.5 us when measured on its own).
            return batch
        while len(batch) < limit:
            chunk = consume(min(_DRAIN_CHUNK, limit - len(batch)), 0)
            batch.extend(chunk)
            if len(chunk) < _DRAIN_CHUNK:
                break
        return batch

    def fetch_error(self, raw: Any) -> bool:
        """``raw`` came with an error instead of a message. Returns True when it only marks the
        end of its partition (``enable.partition.eof``); any other error is reported to
        ``on_fetch_error`` as a :class:`KafkaError` naming topic, partition and offset, or
        raised when the client has no ``on_fetch_error``: never dropped silently."""
        error = raw.error()
        if error.code() == PARTITION_EOF:
            return True
        topic, partition, offset = raw.topic(), raw.partition(), raw.offset()
        failure = to_conveyor_error(
            error,
            KafkaError,
            context=f"fetch error on {topic}/{partition}: ",
            topic=topic,
            partition=partition,
            offset=offset,
        )
        if self._on_fetch_error is None:
            raise failure
        self._on_fetch_error(failure)
        return False

    def commit(
        self,
        offsets: Iterable[tuple[str, int, int]],
        asynchronous: bool = False,
        metadata: Mapping[Partition, str] | None = None,
    ) -> bool:
        """Commit ``(topic, partition, next offset)``s, with the ``metadata`` string given for
        a partition (the others commit none); synchronous unless asked otherwise.

        Returns False when the commit was refused (told to ``on_commit_refused`` too); the
        refusal of an asynchronous commit comes later, in a poll.
        """
        partitions = (
            [offset_with_metadata(t, p, o, metadata.get((t, p))) for t, p, o in offsets]
            if metadata
            else [TopicPartition(t, p, o) for t, p, o in offsets]
        )
        try:
            if asynchronous:  # its outcome comes to on_commit_refused (see _committed)
                self._consumer.commit(offsets=partitions, asynchronous=True)
            else:
                result = self._consumer.commit(offsets=partitions, asynchronous=False)
                return not self._refused(None, result or [], sync=True)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and is_error(exc.args[0]) else exc
            return not self._refused(error, partitions, sync=not asynchronous)
        return True

    def assignment(self) -> set[Partition]:
        return {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def pause(self, partitions: Iterable[Partition]) -> None:
        self._consumer.pause([TopicPartition(t, p) for t, p in partitions])

    def resume(self, partitions: Iterable[Partition]) -> None:
        self._consumer.resume([TopicPartition(t, p) for t, p in partitions])

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._consumer.seek(TopicPartition(topic, partition, offset))

    def cached_high_watermark(self, topic: str, partition: int) -> int:
        """The high watermark librdkafka cached from fetch responses (-1: none yet); no broker
        call. Asked once per poll, on a lone message's path: the key object is kept."""
        key = self._watermark_keys.get((topic, partition))
        if key is None:
            key = self._watermark_keys[(topic, partition)] = TopicPartition(topic, partition)
        return int(self._consumer.get_watermark_offsets(key, cached=True)[1])

    def partitions(self, topic: str, timeout: float = 10.0) -> list[int]:
        """The partition ids of ``topic`` (an empty list if it does not exist)."""
        try:
            metadata = sliced_metadata(
                lambda seconds: self._consumer.list_topics(topic, timeout=seconds),
                timeout,
                self.refused_now,
            ).topics.get(topic)
        except KafkaException as exc:  # the cluster did not answer in time
            raise to_conveyor_error(exc, KafkaError, f"metadata of {topic}: ") from None
        if metadata is None or metadata.error is not None:
            return []
        return sorted(metadata.partitions)

    def refused_now(self) -> AuthenticationError | None:
        """Whether the credentials were refused, serving the client's events to find out when
        nothing is assigned yet (a poll then cannot hand over a message, so none is lost)."""
        if self.credentials_refused is None and not self._consumer.assignment():
            self._consume(1, 0)
        return self.credentials_refused

    def position(self, topic: str, partition: int) -> int | None:
        """The next offset this client reads from ``topic``/``partition`` (``None``: unknown)."""
        [found] = self._consumer.position([TopicPartition(topic, partition)])
        return int(found.offset) if found.offset >= 0 else None

    def query_watermarks(
        self, topic: str, partition: int, timeout: float = 10.0
    ) -> tuple[int, int]:
        """Low and high watermarks, asked of the partition's leader."""
        return ask_watermarks(self._consumer, topic, partition, timeout)

    def offset_for_time(
        self, topic: str, partition: int, milliseconds: int, timeout: float = 10.0
    ) -> int:
        """The first offset at or after ``milliseconds`` (-1 when there is none)."""
        try:
            [found] = self._consumer.offsets_for_times(
                [TopicPartition(topic, partition, milliseconds)], timeout=timeout
            )
        except KafkaException as exc:
            raise to_conveyor_error(
                exc, KafkaError, f"offset by time of {topic}/{partition}: "
            ) from None
        return int(found.offset)

    def group_metadata(self) -> Any:
        """The group's metadata, for committing offsets inside a producer's transaction."""
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        if self._wake is not None:
            self._wake.close()  # librdkafka's queue given back before the consumer goes
        self._consumer.close()
