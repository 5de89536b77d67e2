"""A small log-bucketed histogram of durations: constant memory, ~9 % relative precision."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["Histogram", "Summary"]

_PER_DOUBLING = 8  # buckets per doubling: each ~9 % wide
_FLOOR = 1e-6  # everything under a microsecond shares the first bucket


@dataclass(frozen=True)
class Summary:
    """What a histogram holds, in seconds."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


class Histogram:
    """Durations in seconds, counted in buckets ``2 ** (i / 8)`` microseconds wide.

    Quantiles are read back as the middle of their bucket (clamped to the smallest and
    largest value seen), so they are within ~5 % of the true value; count, mean and max are
    exact. Not thread-safe: its owner locks."""

    __slots__ = ("_buckets", "count", "maximum", "minimum", "total")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.minimum = math.inf
        self.maximum = 0.0

    def record(self, seconds: float, count: int = 1) -> None:
        """Add ``count`` observations of ``seconds`` (negative values count as 0)."""
        if seconds < 0:
            seconds = 0.0
        index = 0 if seconds < _FLOOR else int(math.log2(seconds / _FLOOR) * _PER_DOUBLING) + 1
        self._buckets[index] = self._buckets.get(index, 0) + count
        self.count += count
        self.total += seconds * count
        self.minimum = min(self.minimum, seconds)
        self.maximum = max(self.maximum, seconds)

    def quantile(self, q: float) -> float:
        """The value below which a share ``q`` (0 to 1) of the observations fall (0 when empty)."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                if index == 0:
                    middle = _FLOOR / 2
                else:
                    low = _FLOOR * 2 ** ((index - 1) / _PER_DOUBLING)
                    high = _FLOOR * 2 ** (index / _PER_DOUBLING)
                    middle = math.sqrt(low * high)
                return min(max(middle, self.minimum), self.maximum)
        return self.maximum

    def copy(self) -> Histogram:
        other = Histogram()
        other._buckets = dict(self._buckets)
        other.count, other.total = self.count, self.total
        other.minimum, other.maximum = self.minimum, self.maximum
        return other

    def summary(self) -> Summary:
        return Summary(
            count=self.count,
            mean=self.total / self.count if self.count else 0.0,
            p50=self.quantile(0.5),
            p90=self.quantile(0.9),
            p99=self.quantile(0.99),
            max=self.maximum,
        )
