"""What a topic does when ``consume()`` raises: retry after a back-off, then dispatch or skip.

One :class:`FailurePolicy` per topic holds the whole rule (Karafka's DLQ strategy object):

- every failure counts an attempt; the batch is retried from its first unmarked message
  after :class:`Backoff` says how long (``pause_timeout``, doubling up to ``pause_max_timeout``);
- with a dead letter queue, once the attempts pass ``max_retries`` (or the route's
  ``strategy(error, attempt)`` says so) that first unmarked message is dispatched to the DLQ
  topic (``produce_sync`` or ``produce_async``, in a transaction with its offset or not) or,
  with ``"topic": False``, skipped; then it is marked (``mark_as_consumed`` or
  ``mark_as_consumed_sync``) and processing goes on from the next message. An asynchronous
  copy holds its offset back from commits until the broker acknowledged it (and is sent
  again if it fails); a copy that cannot be sent at all leaves the message in the retry path;
- a message that does not fit its route's model (:class:`~conveyor.errors.MessageValidationError`)
  is dispatched at once: no retry makes it fit;
- ``independent=True`` gives each message its own retries: progress since the previous
  failure starts the count again.

The policy decides and dispatches; the partition's executor keeps the per-partition state
(the attempt count, the marked offset) and asks the policy with it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.errors import (
    ConfigurationError,
    DeliveryError,
    MessageValidationError,
    WaitTimeoutError,
)
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.messages import Message, dead_letter_message
from conveyor.routing.dead_letter_queue import ACTIONS, DeadLetterQueue

if TYPE_CHECKING:
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.instrumentation import Monitor
    from conveyor.processing.context import ProcessingContext
    from conveyor.producer import Producer
    from conveyor.routing.topic import Topic
    from conveyor.settings import AppSettings

__all__ = ["Backoff", "FailurePolicy", "PartitionActions", "Verdict"]

_log = logging.getLogger("conveyor.processing")
_per_message = RateLimitedLog(_log)  # a run of poison messages is one line per interval

RETRY, DISPATCH, SKIP = "retry", "dispatch", "skip"


class Backoff:
    """How long a failing partition waits before its next attempt."""

    __slots__ = ("exponential", "max_timeout", "timeout")

    def __init__(self, timeout: float, max_timeout: float, exponential: bool) -> None:
        self.timeout = timeout
        self.max_timeout = max(max_timeout, timeout)
        self.exponential = exponential

    @classmethod
    def for_route(cls, route: Topic, settings: AppSettings) -> Backoff:
        """The route's ``pause_*`` options, falling back to the app's."""
        exponential = route.pause_with_exponential_backoff
        return cls(
            route.pause_timeout or settings.pause_timeout,
            route.pause_max_timeout or settings.pause_max_timeout,
            settings.pause_with_exponential_backoff if exponential is None else exponential,
        )

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1 for the first failure)."""
        if not self.exponential:
            return self.timeout
        return float(min(self.max_timeout, self.timeout * 2 ** max(0, attempt - 1)))

    def __repr__(self) -> str:
        return f"Backoff({self.timeout}, {self.max_timeout}, exponential={self.exponential})"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The policy's answer to a failure."""

    action: str
    """``"retry"`` (after ``delay``), ``"dispatch"`` (to the DLQ) or ``"skip"``."""
    attempt: int
    """Failed attempts counted so far, this one included."""
    delay: float
    """Seconds before the retry (meaningful for ``"retry"``)."""


class PartitionActions(Protocol):
    """What the policy needs from the partition it acts for (its executor)."""

    topic: str
    partition: int

    @property
    def group_id(self) -> str: ...

    def mark(self, next_offset: int, sync: bool) -> bool: ...

    def group_metadata(self) -> Any: ...

    def enhance_dlq_message(
        self, dlq_message: dict[str, Any], message: Message
    ) -> dict[str, Any]: ...

    def send_held(
        self, offset: int, message: dict[str, Any], producer: Producer
    ) -> DeliveryHandle: ...


class FailurePolicy:
    """Retry, back-off, skip and dead letter dispatch for one topic (see the module)."""

    def __init__(
        self,
        topic: str,
        dead_letter_queue: DeadLetterQueue | None,
        backoff: Backoff,
        monitor: Monitor,
        producer: Callable[[], Producer],
        transactional_producer: Callable[[], Producer],
    ) -> None:
        self.topic = topic
        self.dead_letter_queue = dead_letter_queue
        self.backoff = backoff
        self._monitor = monitor
        self._producer = producer
        self._transactional_producer = transactional_producer

    @classmethod
    def of_route(cls, route: Topic, context: ProcessingContext) -> FailurePolicy:
        """The policy of ``route`` in an app's processing ``context``."""
        return cls(
            route.name,
            route.dead_letter_queue,
            Backoff.for_route(route, context.settings),
            context.monitor,
            context.producer,
            context.transactional_producer,
        )

    def failed(self, error: BaseException, attempt: int, progressed: bool) -> Verdict:
        """``consume()`` raised ``error`` after ``attempt`` earlier failed attempts;
        ``progressed`` says whether a message was marked since the previous failure.

        Raises:
            ConfigurationError: the route's strategy answered something else than an action.
        """
        dlq = self.dead_letter_queue
        if dlq is not None and dlq.independent and progressed:
            attempt = 0  # each message its own retries
        attempt += 1
        return Verdict(self._action(error, attempt), attempt, self.backoff.delay(attempt))

    def _action(self, error: BaseException, attempt: int) -> str:
        dlq = self.dead_letter_queue
        if dlq is None:
            return RETRY
        if dlq.strategy is not None:
            action = dlq.strategy(error, attempt)
            if action not in ACTIONS:
                raise ConfigurationError(
                    f"the dead letter queue strategy of {self.topic!r} returned {action!r}; "
                    "expected retry, dispatch or skip",
                    "strategy",
                )
            return SKIP if action == DISPATCH and dlq.topic is None else action
        if attempt <= dlq.max_retries and self.at_once(error) is None:
            return RETRY
        return DISPATCH if dlq.topic is not None else SKIP

    def at_once(self, error: BaseException) -> str | None:
        """``dispatch`` (or ``skip``) when ``error`` says a payload or key does not fit its
        model and the route has a dead letter queue without a strategy of its own: no retry
        would make it fit. ``None`` otherwise (the usual path)."""
        dlq = self.dead_letter_queue
        if (
            dlq is None
            or dlq.strategy is not None
            or not isinstance(error, MessageValidationError)
            or error.part not in ("payload", "key")
        ):
            return None
        return DISPATCH if dlq.topic is not None else SKIP

    def give_up(
        self,
        message: Message,
        error: BaseException | None,
        attempts: int,
        action: str,
        partition: PartitionActions,
    ) -> None:
        """Dispatch ``message`` to the DLQ (or skip it, as ``action`` says), then mark it."""
        dlq = self.dead_letter_queue
        assert dlq is not None, "give_up needs a dead letter queue"
        if action == DISPATCH and dlq.topic is not None:
            self.dispatch(message, error, attempts, dlq.topic, partition)
            return
        offset = message.offset
        _per_message.warning(
            f"skip:{message.topic}/{message.partition}",
            "%s/%s: skipping offset %s after %s attempt(s)",
            message.topic,
            message.partition,
            offset,
            attempts,
        )
        monitor = self._monitor
        if ev.DEAD_LETTER_QUEUE_SKIPPED in monitor.subscribed:
            monitor.instrument(
                ev.DEAD_LETTER_QUEUE_SKIPPED,
                topic=message.topic,
                partition=message.partition,
                offset=offset,
                attempts=attempts,
                error=error,
            )
        partition.mark(offset + 1, sync=dlq.marking_method == "mark_as_consumed_sync")

    def dispatch(
        self,
        message: Message,
        error: BaseException | None,
        attempts: int,
        dlq_topic: str,
        partition: PartitionActions,
    ) -> None:
        """Send ``message`` to ``dlq_topic`` as the route says (sync or async, in a transaction
        with its offset or not), then mark it as consumed."""
        dlq = self.dead_letter_queue
        offset = message.offset
        copy = dead_letter_message(message, dlq_topic, partition.group_id, attempts, error)
        copy = partition.enhance_dlq_message(copy, message)
        if dlq is not None and dlq.transactional:
            # The DLQ message and the consumer offset past it commit together, or neither does.
            metadata = partition.group_metadata()
            producer = self._transactional_producer()
            with producer.transaction():
                producer.produce_async(**copy)
                producer.transactions.send_offsets(
                    [(message.topic, message.partition, offset + 1)], metadata
                )
            partition.mark(offset + 1, sync=False)
        else:
            producer = self._producer()
            sync_mark = dlq is not None and dlq.marking_method == "mark_as_consumed_sync"
            if dlq is None or dlq.dispatch_method == "produce_sync":
                producer.produce_sync(**copy)
            else:
                # Marked now, committed only once the copy is acknowledged: a crash in between
                # reads the message again instead of losing it from both topics.
                handle = partition.send_held(offset, copy, producer)
                if sync_mark:  # a synchronous commit is meant to include this message
                    with contextlib.suppress(DeliveryError, WaitTimeoutError):
                        handle.wait()
            partition.mark(offset + 1, sync=sync_mark)
        monitor = self._monitor
        if ev.DEAD_LETTER_QUEUE_DISPATCHED in monitor.subscribed:
            monitor.instrument(
                ev.DEAD_LETTER_QUEUE_DISPATCHED,
                topic=message.topic,
                partition=message.partition,
                offset=offset,
                dlq_topic=dlq_topic,
                attempts=attempts,
                error=error,
            )

    def __repr__(self) -> str:
        return f"<FailurePolicy {self.topic} {self.backoff!r} dlq={self.dead_letter_queue!r}>"
