"""``ListenerActions``: what a partition's executor asks of its listener (by name, never the
listener itself). The librdkafka actions (pause, resume, seek, commit_now, group_metadata)
run on the listener's thread."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from conveyor.processing.partition_core import PartitionCore

__all__ = ["ListenerActions"]


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

    def seek(self, executor: PartitionCore, offset: int) -> None: ...

    def commit_now(
        self, topic: str, partition: int, next_offset: int, metadata: str | None = None
    ) -> bool: ...

    def offset_for_time(self, topic: str, partition: int, when: float) -> int: ...

    def group_metadata(self) -> Any: ...

    def forget_group_metadata(self) -> None: ...

    def over_limit(self, executor: PartitionCore) -> None: ...

    def drained(self, executor: PartitionCore) -> None: ...
