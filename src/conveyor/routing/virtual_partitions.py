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

_KEYS = frozenset(
    {"partitioner", "max_partitions", "reducer", "retry_finished_lanes", "max_in_flight", "linger"}
)


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
    max_in_flight: int | None = None
    """Messages handed to lanes and not yet committable, at most (``None``: ten batches'
    worth, at least 2,000); past it, fetching the partition pauses."""
    linger: float = 0.0
    """Seconds a lane waits for a full batch (``max_messages``) before it runs what it has;
    0: each message runs the moment it arrives."""


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
    in_flight = value.get("max_in_flight")
    if in_flight is not None and (
        isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 1
    ):
        raise ConfigurationError(
            f'{where}["max_in_flight"] must be an integer >= 1, got {in_flight!r}', "max_in_flight"
        )
    linger = value.get("linger", 0.0)
    if isinstance(linger, bool) or not isinstance(linger, int | float) or linger < 0:
        raise ConfigurationError(
            f'{where}["linger"] must be a number of seconds >= 0, got {linger!r}', "linger"
        )
    return VirtualPartitions(
        max_in_flight=in_flight,
        linger=float(linger),
        max_partitions=lanes,
        partitioner=value.get("partitioner"),
        reducer=value.get("reducer"),
        retry_finished_lanes=retry_finished,
    )
