"""Processing: the runner, listeners (one per subscription group), per-partition executors,
the failure strategies, the worker pool, and the engine's read-only snapshot."""

from conveyor.processing.context import ProcessingContext
from conveyor.processing.executor import PartitionExecutor
from conveyor.processing.listener import Listener
from conveyor.processing.runner import Runner
from conveyor.processing.snapshot import Snapshot
from conveyor.processing.strategies import Backoff, FailurePolicy
from conveyor.processing.workers import WorkerPool

__all__ = [
    "Backoff",
    "FailurePolicy",
    "Listener",
    "PartitionExecutor",
    "ProcessingContext",
    "Runner",
    "Snapshot",
    "WorkerPool",
]
