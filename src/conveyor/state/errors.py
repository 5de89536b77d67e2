"""The errors of state stores."""

from __future__ import annotations

from conveyor.errors import ConveyorError

__all__ = ["ChangelogMismatchError", "StateError", "StoreCodecMismatchError"]


class StateError(ConveyorError):
    """A store partition could not be opened, restored or written.

    Raised when a partition's stores are opened (its first batch waits for them) or written
    at a batch's end; the batch then fails as if ``consume()`` had raised, and runs again.

    What to do: read the message: it names the store, the partition and the cause.
    """


class ChangelogMismatchError(StateError):
    """A store's local copy does not fit its changelog topic (deleted or recreated since).

    Raised when the partition's store opens and its changelog ends before the offset the
    local copy has reached, or now starts after it (records the copy lacks were deleted).

    What to do: if the changelog was recreated on purpose, delete the store's local folder
    (the message names it), or declare the store with ``Store(rebuild=True)`` to have that
    done when it happens; the store is then rebuilt from what the changelog holds. Otherwise
    find who deleted the topic.
    """


class StoreCodecMismatchError(StateError):
    """A store was opened with another value codec than the one that wrote it.

    Raised when the partition's store opens and its files say they were written with another
    ``Store(values=...)``.

    What to do: declare the codec the store was written with, or rebuild the store (delete
    its local folder and its changelog topic) to start it over with the new one.
    """
