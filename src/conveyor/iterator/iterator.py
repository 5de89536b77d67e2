"""``Iterator``: read topics without a consumer group (Karafka Pro's Iterator)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Mapping
from collections.abc import Iterator as TypingIterator
from datetime import datetime
from typing import Any

from conveyor.driver.consumers import OFFSET_BEGINNING, OFFSET_END, ConsumerClient
from conveyor.errors import ConfigurationError, KafkaError
from conveyor.instrumentation import LoggingListener, Monitor
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.connection import connection_reporter
from conveyor.iterator.scan import reader_settings
from conveyor.messages import Deserializers, Message

__all__ = ["Iterator"]

Start = int | str | datetime


class Iterator:
    """Iterate over messages of one or more topics, never joining a group, never committing.

    ``topics`` maps a topic to ``True`` (every partition, from the earliest message) or to
    ``{partition: start}``, where start is an offset, ``"earliest"``, ``"latest"``, a negative
    number (the last N messages) or an aware ``datetime`` (the first message at or after it).
    Messages come in order per partition. With ``yield_nil`` the iteration yields ``None``
    when nothing arrived within ``max_wait_time`` seconds, so a loop can do other work.
    ``stop()`` (from the loop or another thread) ends the iteration. A fetch error (a
    partition that went away, say) is reported on ``monitor`` as ``error.occurred`` with
    ``type="iterator.fetch.error"`` (logged by default) and the iteration goes on.

    Example::

        with Iterator({"orders": {0: -10}}, kafka={"bootstrap.servers": "127.0.0.1:9092"}) as messages:
            for message in messages:
                print(message.offset, message.payload)
    """

    def __init__(
        self,
        topics: Mapping[str, bool | Mapping[int, Start]],
        kafka: Mapping[str, Any] | None = None,
        *,
        yield_nil: bool = False,
        max_wait_time: float = 0.1,
        deserializers: Deserializers | None = None,
        monitor: Monitor | None = None,
    ) -> None:
        if not kafka or not kafka.get("bootstrap.servers"):
            raise ConfigurationError(
                'Iterator needs kafka settings with "bootstrap.servers"', "bootstrap.servers"
            )
        if not topics:
            raise ConfigurationError("Iterator needs at least one topic", "topics")
        if (
            isinstance(max_wait_time, bool)
            or not isinstance(max_wait_time, int | float)
            or max_wait_time <= 0
        ):
            raise ConfigurationError(
                f"max_wait_time must be a positive number, got {max_wait_time!r}", "max_wait_time"
            )
        self.yield_nil = yield_nil
        self.max_wait_time = float(max_wait_time)
        self._deserializers = deserializers or Deserializers()
        if monitor is None:
            monitor = Monitor()
            LoggingListener().attach(monitor)
        self.monitor = monitor
        self._stopped = threading.Event()
        # librdkafka wants a group id even for assign(); no group is joined and nothing is committed.
        self._client = ConsumerClient(
            reader_settings(kafka, f"conveyor-iterator-{uuid.uuid4().hex}"),
            on_fetch_error=self._on_fetch_error,
            on_connection=connection_reporter(monitor),
        )
        self._client.assign(self._positions(topics))
        self._reading: asyncio.Future[list[Message]] | None = None  # poll_async's read in flight

    def _positions(
        self, topics: Mapping[str, bool | Mapping[int, Start]]
    ) -> list[tuple[str, int, int]]:
        positions: list[tuple[str, int, int]] = []
        for topic, wanted in topics.items():
            known = self._client.partitions(topic)
            if not known:
                raise ConfigurationError(
                    f"topic {topic!r} does not exist (or has no partitions)", "topics"
                )
            if wanted is True:
                starts: Mapping[int, Start] = dict.fromkeys(known, "earliest")
            elif isinstance(wanted, Mapping):
                starts = wanted
            else:
                raise ConfigurationError(
                    f"topics[{topic!r}] must be True or {{partition: start}}", "topics"
                )
            for partition, start in starts.items():
                if partition not in known:
                    raise ConfigurationError(
                        f"{topic!r} has no partition {partition} (it has {len(known)})", "topics"
                    )
                positions.append((topic, partition, self._offset(topic, partition, start)))
        return positions

    def _offset(self, topic: str, partition: int, start: Start) -> int:
        if start == "earliest":
            return OFFSET_BEGINNING
        if start == "latest":
            # A concrete offset, not librdkafka's lazy "end": a message produced right after the
            # iterator was built (an RPC reply, say) must not fall before the resolved position.
            return self._client.query_watermarks(topic, partition)[1]
        if isinstance(start, datetime):
            if start.tzinfo is None:
                raise ConfigurationError("start datetimes must be timezone-aware", "topics")
            found = self._client.offset_for_time(topic, partition, int(start.timestamp() * 1000))
            return found if found >= 0 else OFFSET_END
        if isinstance(start, int) and not isinstance(start, bool):
            if start >= 0:
                return start
            low, high = self._client.query_watermarks(topic, partition)
            return max(low, high + start)
        raise ConfigurationError(
            f"start of {topic}/{partition} must be an offset, 'earliest', 'latest', -N or a datetime, got {start!r}",
            "topics",
        )

    def __iter__(self) -> TypingIterator[Message | None]:
        while not self._stopped.is_set():
            messages = self.poll(self.max_wait_time)
            for message in messages:
                yield message
                if self._stopped.is_set():
                    return
            if not messages and self.yield_nil:
                yield None

    async def __aiter__(self) -> AsyncIterator[Message | None]:
        """``async for message in iterator``: as iterating, without blocking the event loop
        (each read waits on a worker thread, see :meth:`poll_async`)."""
        while not self._stopped.is_set():
            messages = await self.poll_async(self.max_wait_time)
            for message in messages:
                yield message
                if self._stopped.is_set():
                    return
            if not messages and self.yield_nil:
                yield None

    async def poll_async(self, timeout: float, limit: int = 500) -> list[Message]:
        """:meth:`poll` from a coroutine: the read waits on a worker thread, so the event loop
        runs on meanwhile. A read that a cancelled await left running is not lost: the next
        call returns its messages. Await it from one task at a time."""
        reading = self._reading
        if reading is None:
            reading = self._reading = asyncio.ensure_future(
                asyncio.to_thread(self.poll, timeout, limit)
            )
        try:
            return await asyncio.shield(reading)
        finally:
            if reading.done():
                self._reading = None

    def poll(self, timeout: float, limit: int = 500) -> list[Message]:
        """One read, for a loop of its own instead of iterating: wait up to ``timeout`` seconds
        for the first message, then take what has already arrived, up to ``limit``. Fetch
        errors are reported as while iterating. Call it from one thread at a time."""
        messages = []
        for raw in self._client.poll_batch(timeout, limit):
            if raw.error() is not None:
                self._client.fetch_error(raw)
                continue
            messages.append(Message(raw, self._deserializers))
        return messages

    def position(self, topic: str, partition: int) -> int | None:
        """The offset the next read of ``topic``'s ``partition`` starts at (``None`` before
        the first fetch): past the messages read, and past transaction markers, so a reader
        of a transactional topic knows it reached the end when it passes the high watermark."""
        return self._client.position(topic, partition)

    def _on_fetch_error(self, error: KafkaError) -> None:
        if ev.ERROR_OCCURRED in self.monitor.subscribed:
            self.monitor.instrument(ev.ERROR_OCCURRED, type="iterator.fetch.error", error=error)

    def stop(self) -> None:
        """End the iteration (after the message being handled, or the current wait)."""
        self._stopped.set()

    def close(self) -> None:
        self.stop()
        self._client.close()

    def __enter__(self) -> Iterator:
        return self

    async def __aenter__(self) -> Iterator:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.stop()
        reading = self._reading
        if reading is not None:  # the read in flight ends within its timeout
            await asyncio.wait([reading])
        await asyncio.to_thread(self._client.close)

    def __exit__(self, *_exc: object) -> None:
        self.close()
