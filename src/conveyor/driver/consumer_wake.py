"""Waking a listener's consumer out of a poll, so that a command from another thread
(``app.seek``, ``app.pause``, an executor's resume, ``stop()``) is run at once rather than
after the listener's poll slice.

A consumer waits for messages inside librdkafka (``consume()``), and confluent-kafka lets no
other thread call that consumer meanwhile (its calls on one client wait for each other: a
``pause()`` from another thread waits for the ``consume()`` to return). librdkafka has the call
that ends such a wait, ``rd_kafka_queue_yield`` on the consumer's queue: the waiting
``consume()`` returns at once, with what it has (nothing, when it was waiting), and a yield
that comes while nobody waits makes the next wait return at once. confluent-kafka does not
expose it; it is reached through ``ctypes`` as :mod:`~conveyor.driver.loop_serving` reaches
``rd_kafka_queue_io_event_enable``, after the same checks: CPython, a tested confluent-kafka,
one librdkafka, and the client proven to be confluent-kafka's ``Consumer`` laid out as that
version's source says (:func:`~conveyor.driver.loop_serving.handle_of`). When a check fails
there is no wake: the listener's commands wait for its poll slice, as they did before.
"""

from __future__ import annotations

import threading
from typing import Any

import confluent_kafka

from conveyor.driver.loop_serving import handle_of, librdkafka

__all__ = ["ConsumerWake", "consumer_wake"]


class ConsumerWake:
    """Ends the wait of the poll in progress on one consumer (any thread)."""

    def __init__(self, library: Any, queue: int) -> None:
        self._library = library
        self._queue: int | None = queue  # a reference to the consumer's queue: see close()
        self._lock = threading.Lock()

    def wake(self) -> None:
        """The poll in progress returns now (the next one at once, if none waits)."""
        with self._lock:
            if self._queue is not None:
                self._library.queue_yield(self._queue)

    def close(self) -> None:
        """Give librdkafka its queue back; call before the consumer is closed."""
        with self._lock:
            queue, self._queue = self._queue, None
        if queue is not None:
            self._library.destroy_queue(queue)


def consumer_wake(client: Any) -> ConsumerWake | None:
    """A :class:`ConsumerWake` for a confluent-kafka consumer with a ``group.id``, or None
    when it cannot have one (see the module)."""
    library = librdkafka()
    if library is None:
        return None
    handle = handle_of(client, library, confluent_kafka.cimpl.Consumer)
    if handle is None:
        return None
    queue = library.consumer_queue(handle)
    return ConsumerWake(library, queue) if queue else None
