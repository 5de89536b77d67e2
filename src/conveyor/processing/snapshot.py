"""A read-only picture of the running engine (``App.snapshot()``): what the web UI, metrics
and health checks read, and nothing deeper.

Every value is a copy taken at one moment; holding a snapshot keeps nothing of the engine
alive and changing it changes nothing. Times are wall-clock seconds since the epoch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "JobState",
    "ListenerState",
    "PartitionState",
    "PoolState",
    "ProcessState",
    "Snapshot",
]


@dataclass(frozen=True)
class ProcessState:
    """The process the app runs in."""

    pid: int
    hostname: str
    started_at: float | None
    """When the app started consuming (``None`` before ``start()``)."""
    state: str
    """idle, starting, running, quiet, stopping or stopped."""
    swarm_node: int | None = None
    """Its node number in a swarm (``conveyor swarm``), ``None`` outside one."""
    swarm_supervisor: int | None = None
    """The pid of its swarm's supervisor."""


@dataclass(frozen=True)
class ListenerState:
    """One listener: one librdkafka consumer for one subscription group."""

    name: str
    consumer_group: str
    topics: tuple[str, ...]
    state: str
    """created, running, quiet, stopping, stopped or crashed."""
    last_poll_at: float | None
    """When it last asked librdkafka for messages (a stuck listener stops moving this)."""
    partitions: int
    """Partitions assigned to it now."""


@dataclass(frozen=True)
class LaneState:
    """One virtual partition (lane) of a partition."""

    lane: int
    handed_out: int
    """Messages handed to this lane since the partition was assigned to this process."""
    queued: int
    """Messages waiting in this lane now."""
    running: bool


@dataclass(frozen=True)
class PartitionState:
    """One assigned topic-partition."""

    listener: str
    consumer_group: str
    topic: str
    partition: int
    consumer: str | None
    """The consumer class's name (``None`` before its first batch)."""
    committed: int | None
    """The offset this process committed last (the next one to read)."""
    marked: int | None
    """The offset marked as processed (committed at the next commit)."""
    high_watermark: int | None
    """The partition's end as of the latest fetch."""
    lag: int | None
    """Messages not processed yet: the high watermark minus the marked offset (or the committed
    one, or where this process started reading)."""
    pending: int
    """Messages fetched and waiting for ``consume()``."""
    paused: bool
    """Held (paused by the consumer, quieted, waiting out an error) or throttled."""
    retrying: bool
    attempt: int
    """Failed attempts of the current batch (0 when none failed)."""
    lag_seconds: float | None = None
    """Age of the oldest message not processed yet: 0 when caught up, from the first fetched
    message waiting when there is one, else from the last processed message (an upper bound);
    ``None`` when unknown."""
    lanes: tuple[LaneState, ...] = ()
    """Its virtual partitions (empty without them): how its messages spread over the lanes."""
    collapsed: bool = False
    """Running in one lane, in strict order, after a failure (virtual partitions)."""


@dataclass(frozen=True)
class JobState:
    """A batch running on a worker now."""

    listener: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    count: int
    started_at: float
    virtual_partition: int | None = None
    """The lane running it (``None`` without virtual partitions)."""


@dataclass(frozen=True)
class PoolState:
    """The worker pool."""

    size: int
    busy: int
    queued: int
    busy_seconds: float
    """Seconds of work done since the pool started (difference two snapshots for a rate)."""
    utilization: float
    """The share of workers busy at the moment of the snapshot (0 to 1)."""


@dataclass(frozen=True)
class Snapshot:
    """The engine at one moment, as ``App.snapshot()`` returns it."""

    taken_at: float
    process: ProcessState
    listeners: tuple[ListenerState, ...]
    partitions: tuple[PartitionState, ...]
    jobs: tuple[JobState, ...]
    pool: PoolState | None
    """``None`` while the app does not run."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, ready for JSON."""
        return asdict(self)
