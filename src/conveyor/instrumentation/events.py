"""Every event name Conveyor emits on a monitor, in one place (``noun.verb_past``).

Payload keys are listed beside each; every event also carries ``time`` (a
``time.monotonic()`` reading taken when it was emitted).
"""

from __future__ import annotations

__all__ = [
    "ERROR_OCCURRED",
    "EVENTS",
    "MESSAGES_PRODUCED_ASYNC",
    "MESSAGES_PRODUCED_SYNC",
    "MESSAGE_ACKNOWLEDGED",
    "MESSAGE_PRODUCED_ASYNC",
    "MESSAGE_PRODUCED_SYNC",
    "MESSAGE_PURGED",
    "PRODUCER_CLOSED",
    "PRODUCER_RELOADED",
    "STATISTICS_EMITTED",
    "TRANSACTION_ABORTED",
    "TRANSACTION_COMMITTED",
    "TRANSACTION_STARTED",
]

MESSAGE_PRODUCED_ASYNC = "message.produced_async"
"""A message was handed to librdkafka: ``producer_id``, ``message`` (dict), ``label``."""
MESSAGE_PRODUCED_SYNC = "message.produced_sync"
"""A message was delivered by ``produce_sync``: ``producer_id``, ``message``, ``report``, ``duration`` (s)."""
MESSAGES_PRODUCED_ASYNC = "messages.produced_async"
"""A burst was handed to librdkafka: ``producer_id``, ``count``, ``duration`` (s)."""
MESSAGES_PRODUCED_SYNC = "messages.produced_sync"
"""A burst was delivered by ``produce_many_sync``: ``producer_id``, ``count``, ``duration`` (s)."""
MESSAGE_ACKNOWLEDGED = "message.acknowledged"
"""The broker acknowledged a message: ``producer_id``, ``topic``, ``partition``, ``offset``, ``label``."""
MESSAGE_PURGED = "message.purged"
"""A message was purged before delivery (abort, close): ``producer_id``, ``topic``, ``error``, ``label``."""
TRANSACTION_STARTED = "transaction.started"
"""``producer_id``."""
TRANSACTION_COMMITTED = "transaction.committed"
"""``producer_id``, ``duration`` (s)."""
TRANSACTION_ABORTED = "transaction.aborted"
"""``producer_id``, ``duration`` (s), ``error`` (the exception that aborted it)."""
PRODUCER_CLOSED = "producer.closed"
"""``producer_id``, ``undelivered`` (messages purged at close)."""
PRODUCER_RELOADED = "producer.reloaded"
"""The producer rebuilt its client after a fatal error: ``producer_id``, ``attempt``, ``error``."""
STATISTICS_EMITTED = "statistics.emitted"
"""librdkafka's statistics (``statistics.interval.ms``): ``producer_id``, ``statistics`` (parsed JSON)."""
ERROR_OCCURRED = "error.occurred"
"""Something failed: ``type`` (e.g. ``librdkafka.error``, ``producer.delivery.error``,
``monitor.listener.error``), ``error`` (the exception), and the context of the failure."""

EVENTS = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)
"""All event names above."""
