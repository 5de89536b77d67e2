"""``Collapse``: how a partition's lanes go back to order after a failure.

A lane's ``consume()`` that raised (or a partitioner that did) leaves a :class:`Failure`
waiting while the other lanes finish what they run. Then the partition *collapses*: what did
not finish goes, in offset order, to one lane, which runs in strict order (after the failure's
back-off) until the partition passed the last offset handed out before the failure; then the
lanes run again. Used under the partition's lock, by its executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.processing.virtual.tracker import OffsetTracker

__all__ = ["Collapse", "Failure"]


@dataclass
class Failure:
    """A failure waiting for the other lanes before the partition collapses."""

    delay: float
    """The back-off before the collapsed run (0: at once)."""
    until: int
    """The partition runs in one lane at least through this offset."""
    error: BaseException


class Collapse:
    """A partition's failure waiting for its lanes, and the offset its collapse runs through
    (see the module)."""

    def __init__(self) -> None:
        self.failure: Failure | None = None
        """A failure that waits for the running lanes to finish (nothing starts meanwhile)."""
        self.until: int | None = None
        """While collapsed: the partition runs in one lane, in order, through this offset."""

    def fail(self, failure: Failure) -> None:
        """A lane (or the partitioner) failed; with a failure waiting already, the collapse
        waits the longer back-off and runs through the later offset."""
        current = self.failure
        if current is None:
            self.failure = failure
        else:
            current.delay = max(current.delay, failure.delay)
            current.until = max(current.until, failure.until)

    def begin(self, tracker: OffsetTracker, retry_finished: bool) -> tuple[Failure, list[Any]]:
        """Every lane stopped after the failure: collapse through the last offset handed out
        (or further, if collapsed already). Returns the failure and what runs again, in offset
        order: what did not finish (with ``retry_finished``, also what other lanes finished)."""
        failure = self.failure
        assert failure is not None
        self.failure = None
        redo = tracker.outstanding(include_finished=retry_finished)
        until = max(failure.until, tracker.last() or failure.until)
        if self.until is not None:
            until = max(until, self.until)
        self.until = until
        return failure, redo

    def forget(self) -> None:
        """A seek: what was handed out is read again, and runs in the lanes."""
        self.failure = None
        self.until = None
