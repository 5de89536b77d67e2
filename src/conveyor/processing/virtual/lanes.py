"""Which lane a message runs in: the route's partitioner (the message's key by default) and
reducer (a stable hash modulo the lane count by default)."""

from __future__ import annotations

import zlib
from collections.abc import Hashable
from typing import Any

from conveyor.messages import Deserializers, Message
from conveyor.routing.virtual_partitions import VirtualPartitions

__all__ = ["LaneAssigner", "stable_hash"]


def stable_hash(key: Hashable) -> int:
    """A hash that is the same in every process (``hash()`` of bytes and str is salted per
    process): CRC-32 of bytes and text, the value of an int, ``hash()`` of anything else."""
    if key is None:
        return 0
    if isinstance(key, bytes | bytearray | memoryview):
        return zlib.crc32(key)
    if isinstance(key, str):
        return zlib.crc32(key.encode("utf-8", "surrogatepass"))
    if isinstance(key, int):
        return key
    return hash(key)


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
