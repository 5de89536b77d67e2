"""Virtual partitions: parallel lanes inside one topic-partition, order kept per key, commits
that never pass an unfinished message (see :mod:`conveyor.processing.virtual.executor`)."""

from conveyor.processing.virtual.executor import VirtualPartitionExecutor
from conveyor.processing.virtual.lane import Lane
from conveyor.processing.virtual.lanes import LaneAssigner, stable_hash
from conveyor.processing.virtual.tracker import OffsetTracker

__all__ = ["Lane", "LaneAssigner", "OffsetTracker", "VirtualPartitionExecutor", "stable_hash"]
