"""Reading topics without a consumer group."""

from conveyor.iterator.iterator import Iterator

__all__ = ["Iterator"]
