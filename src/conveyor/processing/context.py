"""``ProcessingContext``: the little that processing needs from the application around it.

Processing never sees the ``App``: it gets its settings, its monitor, the producers (built
on first use, so they are accessors), one callback for a crashed thread, a hook that
prepares each new consumer instance (the app sets ``consumer.app`` there), and the app's
tracing and latency recorders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.instrumentation import Monitor
    from conveyor.processing.joint_transaction import JointTransaction
    from conveyor.producer import Producer
    from conveyor.settings import AppSettings
    from conveyor.state.space import StateSpace
    from conveyor.tracing import Latency, Tracing

__all__ = ["ProcessingContext"]


def _leave_as_is(_consumer: Consumer) -> None:
    return None


@dataclass(frozen=True)
class ProcessingContext:
    """What the runner, its listeners and executors are built with."""

    settings: AppSettings
    monitor: Monitor
    producer: Callable[[], Producer]
    """The app's producer (created on first use)."""
    transactional_producer: Callable[[], Producer]
    """The app's transactional producer, for transactional dead letter queues."""
    on_crash: Callable[[BaseException, str], None]
    """Called with the error and where it happened when a listener or a worker crashed."""
    prepare_consumer: Callable[[Consumer], None] = _leave_as_is
    """Called with each new consumer instance before its first hook runs."""
    tracing: Tracing | None = None
    """Spans around ``consume()`` while ``tracing.enabled``."""
    latency: Latency | None = None
    """Per-stage latency histograms while ``latency.active``."""
    stores: StateSpace | None = None
    joint_transaction: JointTransaction | None = None
    """The transaction that consumers' blocks join (``transaction_interval``; ``None``: a
    transaction per block)."""
    """The routes' state stores in this process (``None``: no route declares one)."""
