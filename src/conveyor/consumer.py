"""``Consumer``: the base class of the user's consumers (Karafka's BaseConsumer)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from conveyor.messages import Message, Messages

if TYPE_CHECKING:
    from conveyor.app import App
    from conveyor.processing.executor import PartitionExecutor
    from conveyor.producer import Producer
    from conveyor.routing.topic import Topic

__all__ = ["Consumer"]


class Consumer:
    """Subclass it and implement ``consume``. One instance serves one topic-partition for
    as long as this process owns it, so it may keep state between batches.

    Hooks: ``consume()`` (sync or ``async def``) gets ``self.messages``, a batch of one
    partition in order; ``revoked()`` runs after the partition was taken away; ``shutdown()``
    when the process stops; ``eofed()`` when the end of the partition was reached (with
    ``enable.partition.eof``).

    After ``consume()`` returns, the batch's last offset is marked as consumed (committed
    asynchronously) unless the route has ``manual_offset_management=True``; if it raises, the
    batch is retried after ``pause_timeout`` (growing up to ``pause_max_timeout``).

    Example::

        class OrdersConsumer(Consumer):
            def consume(self) -> None:
                for message in self.messages:
                    handle(message.payload)
    """

    messages: Messages
    """The current batch (one partition, in offset order)."""
    topic: str
    """The topic this instance serves."""
    partition: int
    """The partition this instance serves."""
    route: Topic
    """The route (options) of the topic."""
    app: App
    _executor: PartitionExecutor

    def consume(self) -> Awaitable[None] | None:
        """Handle ``self.messages``. Override this."""
        raise NotImplementedError(f"{type(self).__name__} must implement consume()")

    def revoked(self) -> Awaitable[None] | None:
        """The partition was assigned to another process; stop work that depends on it."""
        return None

    def shutdown(self) -> Awaitable[None] | None:
        """The process is stopping; release what the instance holds."""
        return None

    def eofed(self) -> Awaitable[None] | None:
        """The end of the partition was reached (needs ``enable.partition.eof``)."""
        return None

    def tick(self) -> Awaitable[None] | None:
        """Called when no message arrived for ``max_wait_time`` (override it for periodic work;
        only for partitions that already had a batch in this process)."""
        return None

    # -- offsets ------------------------------------------------------------------------------

    def mark_as_consumed(self, message: Message) -> bool:
        """Store ``message``'s offset as processed; it is committed asynchronously.

        Returns False when this process no longer owns the partition.
        """
        return self._executor.mark(message.offset + 1, sync=False)

    def mark_as_consumed_sync(self, message: Message) -> bool:
        """Store and commit ``message``'s offset now; False if the partition was lost."""
        return self._executor.mark(message.offset + 1, sync=True)

    def is_revoked(self) -> bool:
        """Whether the partition was taken from this process (a long job may stop early)."""
        return self._executor.revoked

    # -- flow ---------------------------------------------------------------------------------

    def pause(self, offset: int | None = None, timeout: float | None = None) -> None:
        """Stop processing this partition; resume from ``offset`` (default: the message after the
        last one marked) after ``timeout`` seconds, or when :meth:`resume` is called."""
        self._executor.request_pause(offset, timeout)

    def resume(self) -> None:
        """Resume a paused partition."""
        self._executor.request_resume()

    def seek(self, offset: int) -> None:
        """Continue this partition from ``offset`` (the rest of the current batch is dropped)."""
        self._executor.request_seek(offset)

    # -- producing ----------------------------------------------------------------------------

    @property
    def producer(self) -> Producer:
        """The app's producer."""
        return self.app.producer

    def produce_sync(self, **message: Any) -> Any:
        return self.app.producer.produce_sync(**message)

    def produce_async(self, **message: Any) -> Any:
        return self.app.producer.produce_async(**message)

    def produce_many_sync(self, messages: Any, **options: Any) -> Any:
        return self.app.producer.produce_many_sync(messages, **options)

    def produce_many_async(self, messages: Any, **options: Any) -> Any:
        return self.app.producer.produce_many_async(messages, **options)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {getattr(self, 'topic', '?')}/{getattr(self, 'partition', '?')}>"
