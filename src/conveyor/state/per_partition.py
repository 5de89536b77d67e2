"""What a consumer class declares once and each of its instances (one per partition) sees
bound to itself: ``self.window`` (a window's open windows), ``self.join`` (a join's sides)."""

from __future__ import annotations

from typing import Any

__all__ = ["PerPartition"]


class PerPartition:
    """A class attribute of a consumer that each consumer instance reads through
    :meth:`bind`, once: ``name`` is the attribute's."""

    name: str

    def bind(self, consumer: Any) -> Any:
        """What ``consumer`` (an instance, one partition's) sees of this declaration."""
        raise NotImplementedError

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, consumer: Any, owner: type | None = None) -> Any:
        if consumer is None:
            return self
        cache = consumer.__dict__
        bound = cache.get(f"_conveyor_bound_{self.name}")
        if bound is None:
            bound = cache[f"_conveyor_bound_{self.name}"] = self.bind(consumer)
        return bound
