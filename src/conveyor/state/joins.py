"""Stream-stream joins: the messages of two co-partitioned topics with one key whose
timestamps lie within ``within`` of each other, paired.

Declare the join on the consumer of one topic (the left side) and name the other topic (the
right side); feed it each batch; it returns the pairs it found::

    class Paid(Consumer):
        join = Join("payments", within=timedelta(minutes=10))

        def consume(self):
            for pair in self.join.update(self.messages):
                self.produce_async(
                    topic="orders.paid", key=pair.key,
                    payload={"order": pair.left.payload, "payment": pair.right.payload})

    app.routes.topic("orders", Paid)

Both sides are kept for the time they may still find a partner: this partition's messages in
a store of the route (named after the attribute, with its changelog), the right topic's
partition of the same number in a store that topic itself feeds (read from where the local
copy stands before the partition's first batch, so a join never reads a side that is still
restoring, then followed a moment behind, as a table is). A pair is found once, when the
second of its two messages is seen: a left message looks for its right partners when its batch
runs; a right record looks for its left partners at the first batch (or :meth:`tick`) after it
arrived. The right records looked at are counted in the left store with the batch, so after a
crash each is looked at again at most (at least once), or exactly once inside
``with self.transaction():``.

Time is the messages' timestamps. The partition's stream time is the latest timestamp either
side carried; a message older than the stream time less ``within`` and ``grace`` is late:
it joins nothing and is listed in ``late`` (the left side's). Both topics must be keyed alike
and have as many partitions (checked at start), and the right topic must keep its records at
least ``within`` plus ``grace`` (its retention is the right side's changelog).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers, Message, record_of
from conveyor.records import Record
from conveyor.state.clock import record_time
from conveyor.state.per_partition import PerPartition
from conveyor.state.store import Store
from conveyor.state.windows import _milliseconds

if TYPE_CHECKING:
    from conveyor.routing.topic import Topic
    from conveyor.state.view import State, StreamBuffer

__all__ = ["Join", "Joined", "PartitionJoin", "stream_row"]

_ENTRY = struct.Struct(">qIB")  # timestamp, the key's length, whether the value is None
_LEFT = b"o"  # + the offset, 8 bytes big-endian: one message of the left side
_PROBED = b"probed"  # the right offset up to which right records looked for partners
_STREAM_TIME = b"stream-time"


def _pack(timestamp: int, key: bytes, value: bytes | None) -> bytes:
    return b"".join((_ENTRY.pack(timestamp, len(key), value is None), key, value or b""))


def _unpack(raw: bytes) -> tuple[int, bytes, bytes | None]:
    timestamp, length, empty = _ENTRY.unpack_from(raw)
    start = _ENTRY.size
    key = raw[start : start + length]
    return timestamp, key, None if empty else raw[start + length :]


def offset_key(offset: int) -> bytes:
    """A record's offset as a store key that sorts as the offsets do."""
    return offset.to_bytes(8, "big")


def _kept(
    topic: str, partition: int, offset: int, entry: tuple[int, bytes, bytes | None]
) -> Record:
    """A kept record as a message of its topic (it keeps no headers)."""
    timestamp, key, value = entry
    return Record(topic, partition, offset, value, key, None, timestamp)


def stream_row(raw: Any) -> tuple[bytes, bytes]:
    """How a record of a joined stream is kept in its buffer: by offset, with its timestamp,
    key and value (a restore's and the follower's writes)."""
    return offset_key(raw.offset()), _pack(record_time(raw), raw.key(), raw.value())


@dataclass(frozen=True)
class Joined:
    """One pair: ``left`` (a message of the consumer's topic) and ``right`` (of the joined
    topic), with one key (``key``, the left message's) and timestamps within the join's
    ``within`` of each other. A message out of a buffer has no headers."""

    key: Any
    left: Message
    right: Message


class _WithStores(Protocol):
    """A consumer, as its join sees it."""

    @property
    def stores(self) -> Mapping[str, State]: ...

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def route(self) -> Topic: ...


class Join(PerPartition):
    """A stream-stream join with ``topic`` (see the module): a class attribute of a consumer.

    Args:
        topic: the right side: a topic keyed as the consumer's, with as many partitions.
        within: how far apart (seconds or a timedelta) two messages' timestamps may be to pair.
        grace: how long after that a late message still joins (default 0).
        deserializers: how the right side's messages are read (default: JSON payloads,
            UTF-8 keys, as the app's routes).
    """

    def __init__(
        self,
        topic: str,
        *,
        within: float | timedelta,
        grace: float | timedelta = 0,
        deserializers: Deserializers | None = None,
    ) -> None:
        if not isinstance(topic, str) or not topic:
            raise ConfigurationError(
                f"Join(topic=...) must be a topic name, got {topic!r}", "topic"
            )
        self.topic = topic
        self.within = _milliseconds("within", within)
        self.grace = _milliseconds("grace", grace, minimum=0)
        self.deserializers = deserializers or Deserializers()
        self.name = "join"

    @property
    def right_store(self) -> str:
        """The name of the store the right topic feeds."""
        return f"{self.name}.right"

    def stores(self) -> dict[str, Store]:
        """The two stores the join keeps its sides in, by name."""
        return {
            self.name: Store(keys="bytes", values="bytes"),
            self.right_store: Store(keys="bytes", values="bytes", source=self.topic, stream=True),
        }

    def bind(self, consumer: _WithStores) -> PartitionJoin:
        return PartitionJoin(self, consumer)


_Side = dict[bytes, list[tuple[int, int, bytes | None]]]  # key -> [(timestamp, offset, value)]


class PartitionJoin:
    """A join as one partition's consumer sees it (``self.join``): :meth:`update` with each
    batch, :meth:`tick` when idle (to pair the right records that came meanwhile)."""

    def __init__(self, declared: Join, consumer: _WithStores) -> None:
        self.declared = declared
        self._consumer = consumer
        self._generation = -1
        self._left: _Side = {}
        self._right: _Side = {}
        self._expiry: list[tuple[int, bool, int, bytes]] = []  # (timestamp, right, offset, key)
        self._on_disk: list[tuple[int, int]] = []  # right records forgotten: (timestamp, offset)
        self._stream = -1
        self._probed = 0
        self.late: list[Message] = []
        """The messages of the last :meth:`update` that came too late to join."""

    @property
    def stream_time(self) -> int:
        """The latest timestamp either side carried (-1: none yet), milliseconds."""
        return self._stream

    def update(self, messages: Iterable[Message]) -> list[Joined]:
        """Pair the right records that came since the last call with the left side, then
        ``messages`` with the right side; the pairs, in that order."""
        left_state, right = self._sides()
        self.late = []
        joined = self._right_arrivals(right)
        within, horizon = self.declared.within, self.declared.grace + self.declared.within
        written: dict[bytes, bytes] = {}
        for message in messages:
            raw = record_of(message)
            timestamp, key = record_time(raw), raw.key()
            self._stream = max(self._stream, timestamp)
            if key is None or timestamp < self._stream - horizon:
                self.late.append(message)
                continue
            for at, offset, value in self._right.get(key, ()):
                if abs(at - timestamp) <= within:
                    joined.append(
                        Joined(message.key, message, self._right_message(offset, (at, key, value)))
                    )
            offset = raw.offset()
            self._keep(self._left, False, timestamp, offset, key, raw.value())
            written[_LEFT + offset_key(offset)] = _pack(timestamp, key, raw.value())
        self._expire(left_state, right, written)
        left_state.update(written)
        left_state[_STREAM_TIME] = str(self._stream).encode()
        left_state[_PROBED] = str(self._probed).encode()
        left_state.late += len(self.late)
        return joined

    def tick(self) -> list[Joined]:
        """Pair the right records that came since the last call (for a partition whose own
        messages stopped coming)."""
        return self.update(())

    # -- the right side ---------------------------------------------------------------------

    def _right_arrivals(self, right: StreamBuffer) -> list[Joined]:
        """The right records the follower wrote since the last call: each pairs with the left
        side (once: those before the probed offset did already) and joins the right side."""
        joined: list[Joined] = []
        within, horizon = self.declared.within, self.declared.grace + self.declared.within
        for raw_offset, raw in right.rows_from(offset_key(self._probed)):
            offset = int.from_bytes(raw_offset, "big")
            timestamp, key, value = entry = _unpack(raw)
            self._probed = offset + 1
            self._stream = max(self._stream, timestamp)
            if timestamp < self._stream - horizon:
                continue  # late: pairs with nothing
            message = None
            for at, left_offset, left_value in self._left.get(key, ()):
                if abs(at - timestamp) <= within:
                    message = message or self._right_message(offset, entry)
                    left = self._left_message(left_offset, (at, key, left_value))
                    joined.append(Joined(left.key, left, message))
            self._keep(self._right, True, timestamp, offset, key, value)
        return joined

    def _right_message(self, offset: int, entry: tuple[int, bytes, bytes | None]) -> Message:
        record = _kept(self.declared.topic, self._consumer.partition, offset, entry)
        return Message(record, self.declared.deserializers)

    def _left_message(self, offset: int, entry: tuple[int, bytes, bytes | None]) -> Message:
        record = _kept(self._consumer.topic, self._consumer.partition, offset, entry)
        return Message(record, self._consumer.route.deserializers)

    # -- both sides' buffers ----------------------------------------------------------------

    def _keep(
        self, side: _Side, right: bool, timestamp: int, offset: int, key: bytes, value: bytes | None
    ) -> None:
        side.setdefault(key, []).append((timestamp, offset, value))
        heapq.heappush(self._expiry, (timestamp, right, offset, key))

    def _expire(self, left_state: State, right: StreamBuffer, written: dict[bytes, bytes]) -> None:
        """Forget what no message on time could pair with any more: older than the stream
        time less twice ``within`` and ``grace``."""
        oldest = self._stream - 2 * self.declared.within - self.declared.grace
        expiry = self._expiry
        while expiry and expiry[0][0] < oldest:
            at, is_right, offset, key = heapq.heappop(expiry)
            side = self._right if is_right else self._left
            kept = [entry for entry in side.get(key, ()) if entry[1] != offset]
            if kept:
                side[key] = kept
            else:
                side.pop(key, None)
            if is_right:
                heapq.heappush(self._on_disk, (at, offset))
            else:
                left_key = _LEFT + offset_key(offset)
                if written.pop(left_key, None) is None:  # (not a message of this batch)
                    left_state.remove(left_key)
        self._forget_on_disk(left_state, right)

    def _forget_on_disk(self, left_state: State, right: StreamBuffer) -> None:
        """Delete the right records forgotten in memory from the right store once the stream
        time that forgot them is durable (flushed, or committed): a batch that fails runs
        again from the stores as they were, and may need them."""
        durable = left_state.stored(_STREAM_TIME)
        if durable is None:
            return
        oldest = int(durable) - 2 * self.declared.within - self.declared.grace
        on_disk, gone = self._on_disk, []
        while on_disk and on_disk[0][0] < oldest:
            gone.append(offset_key(heapq.heappop(on_disk)[1]))
        if gone:
            right.forget(gone)

    def _sides(self) -> tuple[State, StreamBuffer]:
        """The two stores, loaded into memory once per assignment, and again after a failed
        batch's writes were dropped (its probed offset and messages with them)."""
        stores = self._consumer.stores
        left_state = stores[self.declared.name]
        right: StreamBuffer = stores[self.declared.right_store]  # type: ignore[assignment]
        if self._generation == left_state.generation:
            return left_state, right
        self._generation = left_state.generation
        self._left, self._right, self._expiry, self._on_disk = {}, {}, [], []
        self._stream = int(left_state.get(_STREAM_TIME, b"-1"))
        self._probed = int(left_state.get(_PROBED, b"0"))
        for raw_key in left_state:
            if raw_key.startswith(_LEFT) and len(raw_key) == 9:
                timestamp, key, value = _unpack(left_state[raw_key])
                offset = int.from_bytes(raw_key[1:], "big")
                self._keep(self._left, False, timestamp, offset, key, value)
        for raw_offset, raw in right.rows_from(b""):
            offset = int.from_bytes(raw_offset, "big")
            if offset >= self._probed:
                break  # not looked at yet: the next update pairs it
            timestamp, key, value = _unpack(raw)
            self._keep(self._right, True, timestamp, offset, key, value)
        return left_state, right
