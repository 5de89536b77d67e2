"""``ListenerActions``: what a partition's executor asks of its listener (by name, never the
listener itself). The librdkafka actions (pause, resume, seek, commit_now, group_metadata)
run on the listener's thread. ``FetchedPartition``: the executor as those actions see it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

__all__ = ["FetchedPartition", "ListenerActions"]


class FetchedPartition(Protocol):
    """An executor as the listener's actions see it: the partition it fetches for, and the
    two calls the listener makes back on its thread."""

    @property
    def topic(self) -> str:
        """The partition's topic."""

    @property
    def partition(self) -> int:
        """The partition's number."""

    def discard_pending(self) -> None:
        """A seek is done: what was fetched before it is stale."""

    def throttle(self) -> bool:
        """Too much is pending: True when the listener should now pause fetching."""


class ListenerActions(Protocol):
    """What an executor asks of its listener. The librdkafka actions (pause, resume, seek,
    commit_now, group_metadata) run on the listener's thread."""

    @property
    def group_id(self) -> str:
        """The consumer group the listener reads in."""

    quieted: bool
    """Whether the listener takes no new batches (read per add)."""

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the worker pool."""

    def run_here(self, job: Callable[[], None]) -> None:
        """Run ``job`` (a quick batch) on the listener's own thread."""

    def submit_coroutine(self, coroutine: Coroutine[Any, Any, None], name: str = "") -> None:
        """Run ``coroutine`` on the app's event loop (an ``async def consume()``'s lane)."""

    def job_started(self) -> None:
        """A job of the executor starts (the listener waits for its jobs at shutdown)."""

    def job_finished(self) -> None:
        """A job of the executor ended."""

    def pause(self, topic: str, partition: int) -> None:
        """Stop fetching the partition."""

    def resume(self, topic: str, partition: int, then: Callable[[], None] | None = None) -> None:
        """Fetch the partition again; ``then`` runs right after, on the listener's thread."""

    def seek(self, executor: FetchedPartition, offset: int) -> None:
        """Continue ``executor``'s partition from ``offset``; what was fetched before is dropped."""

    def commit_now(
        self, topic: str, partition: int, next_offset: int, metadata: str | None = None
    ) -> bool:
        """Commit ``next_offset`` (with ``metadata``) and wait; False when refused or not done."""

    def offset_for_time(self, topic: str, partition: int, when: float) -> int:
        """The first offset at or after ``when`` (epoch seconds), else the partition's end."""

    def group_metadata(self) -> Any:
        """The group's metadata, for the offsets a transaction commits."""

    def forget_group_metadata(self) -> None:
        """The cached group metadata is stale: the next transaction asks again."""

    def over_limit(self, executor: FetchedPartition) -> None:
        """``executor``'s backlog passed its high-water mark (on the listener's thread)."""

    def drained(self, executor: FetchedPartition) -> None:
        """``executor``'s backlog fell below its low-water mark."""
