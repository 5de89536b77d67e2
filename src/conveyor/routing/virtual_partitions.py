"""The ``virtual_partitions`` route option: its settings and their validation.

How a partition's messages are spread over lanes and committed is
:mod:`conveyor.processing.virtual`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["Partitioner", "Reducer", "VirtualPartitions", "parse_virtual_partitions"]

Partitioner = Callable[["Message"], Hashable]
"""``message -> key``: messages with equal keys run in one lane, in offset order."""
Reducer = Callable[[Any], int]
"""``key -> lane`` (an int; taken modulo ``max_partitions``)."""

_KEYS = frozenset({"partitioner", "max_partitions", "reducer", "retry_finished_lanes"})


@dataclass(frozen=True)
class VirtualPartitions:
    """A topic's validated ``virtual_partitions`` settings."""

    max_partitions: int | None = None
    """Lanes per partition; ``None``: the app's ``concurrency``."""
    partitioner: Partitioner | None = None
    """``None``: the message's key (raw bytes; keyless messages share one lane)."""
    reducer: Reducer | None = None
    """``None``: a stable hash of the key (CRC-32 of its bytes) modulo ``max_partitions``."""
    retry_finished_lanes: bool = False
    """After a failure, run again the messages other lanes already finished (off: they are
    not run twice)."""


def parse_virtual_partitions(topic: str, value: Any) -> VirtualPartitions | None:
    """Validate a route's ``virtual_partitions`` option (``None`` when not given)."""
    if value is None or value is False:
        return None
    where = f"routes.topic({topic!r}): virtual_partitions"
    if value is True:
        return VirtualPartitions()
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{where} must be a dict, got {type(value).__name__}", "virtual_partitions"
        )
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where} has an unknown key {unknown[0]!r}; known: {', '.join(sorted(_KEYS))}",
            unknown[0],
        )
    lanes = value.get("max_partitions")
    if lanes is not None and (isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1):
        raise ConfigurationError(
            f'{where}["max_partitions"] must be an integer >= 1, got {lanes!r}', "max_partitions"
        )
    for name in ("partitioner", "reducer"):
        function = value.get(name)
        if function is not None and not callable(function):
            raise ConfigurationError(f'{where}["{name}"] must be callable, got {function!r}', name)
    retry_finished = value.get("retry_finished_lanes", False)
    if not isinstance(retry_finished, bool):
        raise ConfigurationError(
            f'{where}["retry_finished_lanes"] must be True or False', "retry_finished_lanes"
        )
    return VirtualPartitions(
        max_partitions=lanes,
        partitioner=value.get("partitioner"),
        reducer=value.get("reducer"),
        retry_finished_lanes=retry_finished,
    )
