"""Which lane a message runs in: the route's partitioner (the message's key by default) and
reducer (a stable hash modulo the lane count by default)."""

from __future__ import annotations

import datetime
import zlib
from collections.abc import Hashable
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

from conveyor.messages import Deserializers, Message
from conveyor.routing.virtual_partitions import VirtualPartitions

__all__ = ["LaneAssigner", "stable_hash"]


def stable_hash(key: Hashable) -> int:
    """A hash that is the same in every process and every run (``hash()`` of bytes and str is
    salted per process): CRC-32 of bytes and text, the value of an int (and of a float that is
    one), the members' hashes combined for a tuple, an enum's value's, CRC-32 of a UUID's bytes
    and of the text of a float, a decimal, a date or a time. Any other type (a model of your
    own) gets ``hash()``: the same lane for a key within a process, which is all that per-key
    order needs, but maybe another lane after a restart."""
    if key is None:
        return 0
    if isinstance(key, bytes | bytearray | memoryview):
        return zlib.crc32(key)
    if isinstance(key, str):
        return zlib.crc32(key.encode("utf-8", "surrogatepass"))
    if isinstance(key, int):  # bool too
        return int(key)
    if isinstance(key, Enum):
        return stable_hash(key.value)
    if isinstance(key, tuple):
        combined = ",".join(str(stable_hash(member)) for member in key)
        return zlib.crc32(combined.encode("ascii"))
    if isinstance(key, UUID):
        return zlib.crc32(key.bytes)
    if isinstance(key, float) and key.is_integer():
        return int(key)
    if isinstance(key, float | Decimal | datetime.date | datetime.time | datetime.timedelta):
        return zlib.crc32(str(key).encode("ascii"))
    return hash(key)  # the same within this process, which is all per-key order needs


class LaneAssigner:
    """Maps a raw message to its lane (``0 .. lanes - 1``)."""

    __slots__ = ("_deserializers", "_partitioner", "_reducer", "lanes")

    def __init__(
        self, settings: VirtualPartitions, lanes: int, deserializers: Deserializers
    ) -> None:
        self.lanes = lanes
        self._partitioner = settings.partitioner
        self._reducer = settings.reducer
        self._deserializers = deserializers

    def lane_of(self, raw: Any) -> int:
        """The lane of ``raw``; raises what the user's partitioner or reducer raised."""
        partitioner = self._partitioner
        key = raw.key() if partitioner is None else partitioner(Message(raw, self._deserializers))
        reducer = self._reducer
        lane = stable_hash(key) if reducer is None else reducer(key)
        if isinstance(lane, bool) or not isinstance(lane, int):
            raise TypeError(f"the virtual partitions reducer returned {lane!r}, not an int")
        return lane % self.lanes
