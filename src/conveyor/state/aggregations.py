"""What a window computes over its messages: ``Count()``, ``Sum("amount")``, ``Min``, ``Max``,
``Mean``, ``Latest``, ``Collect`` and ``Reduce`` (your own function).

Each aggregation keeps a small JSON value per window (its accumulator), so that the window's
store entry is one JSON list however many messages it saw: ``start`` makes it, ``add`` folds
one value in, ``merge`` joins two (session windows that grow into each other) and ``result``
turns it into what the window emits.

The value an aggregation reads from a message is ``field`` of its payload (a key of a dict,
an attribute of a model), the payload itself without one, or what ``value(message)`` returns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from conveyor.errors import ConfigurationError
from conveyor.messages import Message

_IMMUTABLE = frozenset({int, float, str, bool, bytes, type(None)})

__all__ = ["Aggregation", "Collect", "Count", "Latest", "Max", "Mean", "Min", "Reduce", "Sum"]


class Aggregation:
    """One computation over a window's messages (see the module)."""

    def __init__(
        self, field: str | None = None, *, value: Callable[[Message], Any] | None = None
    ) -> None:
        if field is not None and value is not None:
            raise ConfigurationError(
                f"{type(self).__name__}: give field or value, not both", "field"
            )
        if value is not None and not callable(value):
            raise ConfigurationError(f"{type(self).__name__}: value must be callable", "value")
        self.field = field
        self._value = value

    def read(self, message: Message) -> Any:
        """The value of ``message`` this aggregation folds in."""
        if self._value is not None:
            return self._value(message)
        payload = message.payload
        if self.field is None:
            return payload
        if isinstance(payload, dict):
            return payload.get(self.field)
        return getattr(payload, self.field, None)

    def start(self) -> Any:
        return None

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        raise NotImplementedError

    def merge(self, first: Any, second: Any) -> Any:
        raise NotImplementedError

    def result(self, accumulator: Any) -> Any:
        return accumulator

    def copy(self, accumulator: Any) -> Any:
        """An accumulator :meth:`add` may change without changing ``accumulator`` (a batch's
        first message in a window starts from a copy: a batch that fails leaves the window as
        it was). Immutable ones are their own copy."""
        return accumulator


class Count(Aggregation):
    """How many messages the window saw."""

    def start(self) -> Any:
        return 0

    def read(self, message: Message) -> Any:
        return None  # counts messages, reads nothing

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        return accumulator + 1

    def merge(self, first: Any, second: Any) -> Any:
        return first + second


class Sum(Aggregation):
    """The sum of a field (``None`` values are skipped)."""

    def start(self) -> Any:
        return 0

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        return accumulator if value is None else accumulator + value

    def merge(self, first: Any, second: Any) -> Any:
        return first + second


class Min(Aggregation):
    """The smallest value of a field (``None`` when it saw none)."""

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        if value is None:
            return accumulator
        return value if accumulator is None or value < accumulator else accumulator

    def merge(self, first: Any, second: Any) -> Any:
        return self.add(first, second, 0)


class Max(Aggregation):
    """The largest value of a field (``None`` when it saw none)."""

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        if value is None:
            return accumulator
        return value if accumulator is None or value > accumulator else accumulator

    def merge(self, first: Any, second: Any) -> Any:
        return self.add(first, second, 0)


class Mean(Aggregation):
    """The mean of a field (``None`` when it saw no value)."""

    def start(self) -> Any:
        return [0, 0]  # sum, count

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        if value is None:
            return accumulator
        return [accumulator[0] + value, accumulator[1] + 1]

    def merge(self, first: Any, second: Any) -> Any:
        return [first[0] + second[0], first[1] + second[1]]

    def result(self, accumulator: Any) -> Any:
        return accumulator[0] / accumulator[1] if accumulator[1] else None


class Latest(Aggregation):
    """The value of the message with the latest timestamp (the later offset on a tie)."""

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        if accumulator is None or timestamp >= accumulator[0]:
            return [timestamp, value]
        return accumulator

    def merge(self, first: Any, second: Any) -> Any:
        if first is None:
            return second
        if second is None:
            return first
        return second if second[0] >= first[0] else first

    def result(self, accumulator: Any) -> Any:
        return None if accumulator is None else accumulator[1]


class Collect(Aggregation):
    """Every value, in the order the messages came (keep windows small: it is all kept)."""

    def start(self) -> Any:
        return []

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        accumulator.append(value)
        return accumulator

    def merge(self, first: Any, second: Any) -> Any:
        return first + second

    def copy(self, accumulator: Any) -> Any:
        return list(accumulator)

    def result(self, accumulator: Any) -> Any:
        return list(accumulator)  # the window's own list goes on growing


class Reduce(Aggregation):
    """Your own fold: ``reducer(accumulator, value) -> accumulator``, starting from
    ``initial``; ``merge(first, second)`` for session windows (default: fold ``second``'s
    accumulator in as if it were a value). Accumulators must be JSON values."""

    def __init__(
        self,
        reducer: Callable[[Any, Any], Any],
        initial: Any = None,
        field: str | None = None,
        *,
        value: Callable[[Message], Any] | None = None,
        merge: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        super().__init__(field, value=value)
        if not callable(reducer):
            raise ConfigurationError("Reduce: reducer must be callable", "reducer")
        self._reducer = reducer
        self._initial = initial
        self._merge = merge

    def start(self) -> Any:
        return self.copy(self._initial)

    def add(self, accumulator: Any, value: Any, timestamp: int) -> Any:
        return self._reducer(accumulator, value)

    def copy(self, accumulator: Any) -> Any:
        # a reducer may change its accumulator in place (``acc.append(v) or acc``)
        return accumulator if type(accumulator) in _IMMUTABLE else copy.deepcopy(accumulator)

    def merge(self, first: Any, second: Any) -> Any:
        if self._merge is not None:
            return self._merge(first, second)
        return self._reducer(first, second)
