"""librdkafka's partitioners in Python, for ``partition_key`` (partition by one key, send another).

Each function maps key bytes and a partition count to the partition that librdkafka
(and, for murmur2, the Java client) would pick for that key, so a message produced
with ``partition_key=k`` lands where a message keyed ``k`` would.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

__all__ = ["PARTITIONERS", "Partitioner", "fnv1a", "murmur2", "partitioner_for"]

Partitioner = Callable[[bytes | None, int], int]


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (the Java client's default partitioner hash), as a signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    h = (seed ^ length) & 0xFFFFFFFF
    tail = length - length % 4
    for index in range(0, tail, 4):
        k = int.from_bytes(data[index : index + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    remaining = length % 4
    if remaining == 3:
        h ^= data[tail + 2] << 16
    if remaining >= 2:
        h ^= data[tail + 1] << 8
    if remaining >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def fnv1a(data: bytes) -> int:
    """32-bit FNV-1a as librdkafka's ``fnv1a`` partitioner computes it: the absolute value of
    the signed hash (to match Sarama's default partitioner), as an unsigned 32-bit int."""
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    if h & 0x80000000:  # negative as int32: take its absolute value, wrapping like C
        h = (-(h - (1 << 32))) & 0xFFFFFFFF
    return h


def _crc32(key: bytes | None, count: int) -> int:
    return zlib.crc32(key or b"") % count


def _crc32_random(key: bytes | None, count: int) -> int:
    return random.randrange(count) if key is None else zlib.crc32(key) % count


def _murmur2(key: bytes | None, count: int) -> int:
    return (murmur2(key or b"") & 0x7FFFFFFF) % count


def _murmur2_random(key: bytes | None, count: int) -> int:
    return random.randrange(count) if key is None else _murmur2(key, count)


def _fnv1a(key: bytes | None, count: int) -> int:
    return fnv1a(key or b"") % count


def _fnv1a_random(key: bytes | None, count: int) -> int:
    return random.randrange(count) if key is None else _fnv1a(key, count)


def _random(_key: bytes | None, count: int) -> int:
    return random.randrange(count)


PARTITIONERS: dict[str, Partitioner] = {
    "consistent_random": _crc32_random,
    "consistent": _crc32,
    "murmur2_random": _murmur2_random,
    "murmur2": _murmur2,
    "fnv1a_random": _fnv1a_random,
    "fnv1a": _fnv1a,
    "random": _random,
}
"""librdkafka's ``partitioner`` setting values and their Python equivalents."""


def partitioner_for(name: str) -> Partitioner:
    """The partitioner librdkafka uses for its ``partitioner`` setting ``name``."""
    return PARTITIONERS[name]
