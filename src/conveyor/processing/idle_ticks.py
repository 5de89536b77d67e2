"""Which partitions get their consumer's ``tick()``: each assigned partition that has had no
message for its route's ``max_wait_time``, on its own — a busy partition does not hold back
its idle siblings' ticks, and a partition that never had a message in this process ticks too
(Karafka's periodic jobs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from conveyor.consumer import Consumer

if TYPE_CHECKING:
    from conveyor.driver.consumers import Partition
    from conveyor.processing.partition_core import PartitionCore
    from conveyor.routing.topic import Topic

__all__ = ["IdleTicks", "ticks"]

# Checks come this often per max_wait_time: a tick comes between one and one and a half of it
# after the partition's last message, and the listener's loop pays for no check in between.
_CHECKS_PER_WAIT = 4


def ticks(route: Topic | None) -> bool:
    """Whether ``route``'s consumer class defines ``tick()``."""
    consumer_class = route.consumer_class if route is not None else None
    return consumer_class is not None and consumer_class.tick is not Consumer.tick


class IdleTicks:
    """The listener's clock for ``tick()``: it calls :meth:`check` once ``next_check`` passed."""

    __slots__ = ("_every", "_seen", "next_check")

    def __init__(self, max_wait_time: float) -> None:
        self._every = max_wait_time
        # each partition's handed-out count when it was last seen to change, and when
        self._seen: dict[Partition, tuple[int, float]] = {}
        self.next_check = 0.0

    def check(
        self,
        assigned: Iterable[Partition],
        executor_of: Callable[[Partition], PartitionCore | None],
        now: float,
    ) -> None:
        """Tick every partition of ``assigned`` idle for a whole ``max_wait_time``;
        ``executor_of`` gives a ticking route's executor (made for an idle partition too)."""
        self.next_check = now + self._every / _CHECKS_PER_WAIT
        seen: dict[Partition, tuple[int, float]] = {}
        for key in assigned:
            executor = executor_of(key)
            if executor is None:
                continue
            last = self._seen.get(key)
            if last is None or last[0] != executor.fed:
                seen[key] = (executor.fed, now)
            elif now - last[1] >= self._every:
                executor.tick()
                seen[key] = (executor.fed, now)
            else:
                seen[key] = last
        self._seen = seen  # partitions no longer assigned are forgotten
