"""Processing: listeners (one per subscription group), per-partition executors, the worker pool."""

from conveyor.processing.executor import PartitionExecutor
from conveyor.processing.listener import Listener
from conveyor.processing.workers import WorkerPool

__all__ = ["Listener", "PartitionExecutor", "WorkerPool"]
