"""A stand-in for the consumer client that ``iterator.scan``'s bounded reads use."""

from __future__ import annotations

from typing import Any


class FakeClient:
    """What a bounded read uses of a consumer: assign, then polls that hand out ``raws``;
    each empty poll moves the shared clock ``now`` on by its timeout."""

    def __init__(self, raws: list[Any], now: list[float]) -> None:
        self.raws = list(raws)
        self.assigned: list[Any] = []
        self.now = now

    def assign(self, positions: list[Any]) -> None:
        self.assigned = positions

    def poll_batch(self, timeout: float, limit: int) -> list[Any]:
        batch, self.raws = self.raws[:limit], self.raws[limit:]
        self.now[0] += timeout if not batch else 0.001  # an empty poll waits its timeout
        return batch

    def fetch_error(self, raw: Any) -> bool:
        return True
