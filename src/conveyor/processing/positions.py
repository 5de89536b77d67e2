"""Where an assigned partition starts reading: its committed offset, or, only when the group
has committed none, the route's initial offset.

librdkafka can resolve this itself (an assignment at ``OFFSET_STORED``), but when it cannot
read the committed offset (for example while an open transaction holds it: the broker answers
``UNSTABLE_OFFSET_COMMIT`` until that transaction ends, KIP-447) and the assignment changes
meanwhile, it has paths that end in ``auto.offset.reset``: an exactly-once pipeline then reads
its partition again from the start. The listener asks instead, and assigns the answer: an
offset that is unknown is never taken for one that does not exist.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from conveyor.driver.consumers import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    Committed,
    Partition,
)
from conveyor.errors import ConveyorError, KafkaError

__all__ = ["StartAbandoned", "StartPositions", "initial_position"]

_log = logging.getLogger("conveyor.positions")

_FIRST_ASK = 1.0
"""Seconds the first ask may take before the listener fences its slot's predecessor."""
_ASK = 5.0
_AGAIN = 0.5
"""Seconds before asking again after a failure that came back at once (not a timeout)."""


class StartAbandoned(ConveyorError):
    """A listener stopped while it read the committed offsets of newly assigned partitions.

    Raised when the app stops (or the listener's client is closed) before the committed
    offsets came: the partitions were not started, and nothing is left to do with them. The
    listener catches it; it never reaches your code.

    What to do: nothing: the next owner of the partitions starts them from their committed
    offsets.
    """


class _Committed(Protocol):
    def committed(
        self, partitions: Iterable[Partition], timeout: float
    ) -> dict[Partition, Committed]: ...


def initial_position(auto_offset_reset: str) -> int:
    """The start offset a partition without a committed offset gets: librdkafka's logical
    offset for ``auto.offset.reset`` (``error`` leaves it to librdkafka, which reports it)."""
    if auto_offset_reset in ("earliest", "smallest", "beginning"):
        return OFFSET_BEGINNING
    if auto_offset_reset in ("latest", "largest", "end"):
        return OFFSET_END
    return OFFSET_STORED


class StartPositions:
    """Resolves the start offsets of a listener's assigned partitions (on its thread)."""

    def __init__(
        self,
        client: _Committed,
        initial: int,
        budget: float,
        on_stall: Callable[[], None],
        on_error: Callable[[KafkaError], None],
        stopping: threading.Event,
    ) -> None:
        self._client = client
        self._stopping = stopping
        self._initial = initial
        self._budget = budget
        self._on_stall = on_stall
        self._on_error = on_error

    def resolve(
        self, partitions: list[Partition], group: str
    ) -> tuple[list[tuple[str, int, int]], dict[Partition, str]]:
        """``(topic, partition, start offset)`` for each partition: the committed offset, else
        the initial one; and the metadata committed with the offsets (of the partitions whose
        commit had some). Asks again while the broker does not answer; the first time an ask
        times out, ``on_stall`` runs (the app fences the transaction of a crashed predecessor
        that holds the offsets), and every later failure goes to ``on_error``. Asks no more
        once ``stopping`` is set.

        Raises:
            StartAbandoned: ``stopping`` was set, or the client closed, before an answer came.
            ConveyorError: the committed offsets stayed unknown for the whole budget.
        """
        if not partitions:
            return [], {}
        deadline = time.monotonic() + self._budget
        ask = _FIRST_ASK
        stalled = False
        while True:
            if self._stopping.is_set():
                raise StartAbandoned(
                    f"{group}: stopped while reading the committed offsets of {_names(partitions)}"
                )
            asked = time.monotonic()
            try:
                committed = self._client.committed(
                    partitions, timeout=max(0.1, min(ask, deadline - asked))
                )
                break
            except KafkaError as failure:
                if self._stopping.is_set() or failure.name == "_DESTROY":
                    # The app stops (its shutdown may have closed the client under this ask).
                    raise StartAbandoned(
                        f"{group}: stopped while reading the committed offsets of "
                        f"{_names(partitions)} ({failure})"
                    ) from failure
                if time.monotonic() >= deadline:
                    raise ConveyorError(
                        f"{group}: the committed offsets of {_names(partitions)} stayed unknown "
                        f"for {self._budget:.0f} s ({failure}); not starting them from the "
                        "initial offset, which would read them again"
                    ) from failure
                if not stalled and failure.name == "_TIMED_OUT":
                    # Most likely an open transaction holds them: not an error (yet).
                    stalled = True
                    _log.info("%s: %s (fencing a predecessor's transaction)", group, failure)
                    self._on_stall()
                else:
                    self._on_error(failure)
                ask = _ASK
                if time.monotonic() - asked < _AGAIN:  # refused at once: not a busy loop
                    self._stopping.wait(_AGAIN)
        offsets = {key: found.offset for key, found in committed.items()}
        positions = [
            (topic, partition, offsets.get((topic, partition), self._initial))
            for topic, partition in partitions
        ]
        if _log.isEnabledFor(logging.DEBUG):
            for topic, partition, offset in positions:
                where = (
                    f"committed offset {offset}"
                    if (topic, partition) in committed
                    else f"no committed offset: initial {_logical(offset)}"
                )
                _log.debug("%s: %s/%s starts at %s", group, topic, partition, where)
        metadata = {key: found.metadata for key, found in committed.items() if found.metadata}
        return positions, metadata


def _names(partitions: list[Partition]) -> str:
    return ", ".join(f"{topic}/{partition}" for topic, partition in partitions)


def _logical(offset: int) -> str:
    return {OFFSET_BEGINNING: "earliest", OFFSET_END: "latest"}.get(offset, str(offset))
