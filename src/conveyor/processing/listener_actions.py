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
    def group_id(self) -> str: ...

    quieted: bool

    def submit(self, job: Callable[[], None]) -> None: ...

    def run_here(self, job: Callable[[], None]) -> None: ...

    def submit_coroutine(self, coroutine: Coroutine[Any, Any, None], name: str = "") -> None: ...

    def job_started(self) -> None: ...

    def job_finished(self) -> None: ...

    def pause(self, topic: str, partition: int) -> None: ...

    def resume(
        self, topic: str, partition: int, then: Callable[[], None] | None = None
    ) -> None: ...

    def seek(self, executor: FetchedPartition, offset: int) -> None: ...

    def commit_now(
        self, topic: str, partition: int, next_offset: int, metadata: str | None = None
    ) -> bool: ...

    def offset_for_time(self, topic: str, partition: int, when: float) -> int: ...

    def group_metadata(self) -> Any: ...

    def forget_group_metadata(self) -> None: ...

    def over_limit(self, executor: FetchedPartition) -> None: ...

    def drained(self, executor: FetchedPartition) -> None: ...
