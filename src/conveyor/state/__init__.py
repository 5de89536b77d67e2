"""State stores bound to partitions: ``self.state`` in a consumer, kept in RocksDB (or memory)
and backed by a compacted changelog topic per store.

Declare them on the route; each assigned partition gets its own store partition, restored from
the changelog before its first batch::

    from conveyor import App, Consumer
    from conveyor.state import Store

    class Counts(Consumer):
        def consume(self) -> None:
            counts = self.state
            for message in self.messages:
                counts[message.key] = counts.get(message.key, 0) + 1

    app.routes.topic("clicks", Counts, state=Store())

What a batch writes is kept apart until the batch ends well: then each written key goes once
to the changelog and, once Kafka acknowledged it, to the local store; the batch's offset is
marked after that. A batch that fails writes nothing. See the state guide.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from conveyor.state.aggregations import (
        Aggregation,
        Collect,
        Count,
        Latest,
        Max,
        Mean,
        Min,
        Reduce,
        Sum,
    )
    from conveyor.state.changelogs import changelog_topic
    from conveyor.state.errors import ChangelogMismatchError, StateError, StoreCodecMismatchError
    from conveyor.state.partition_stores import Restored
    from conveyor.state.store import Codec, Store
    from conveyor.state.view import State
    from conveyor.state.windows import Hopping, Session, Tumbling, Windowed, WindowResult

# Loaded on first use: `conveyor topics plan` reads the changelogs' names without the engine.
_ON_FIRST_USE = {
    **dict.fromkeys(
        ("Aggregation", "Collect", "Count", "Latest", "Max", "Mean", "Min", "Reduce", "Sum"),
        "conveyor.state.aggregations",
    ),
    **dict.fromkeys(
        ("Hopping", "Session", "Tumbling", "WindowResult", "Windowed"), "conveyor.state.windows"
    ),
    "ChangelogMismatchError": "conveyor.state.errors",
    "Codec": "conveyor.state.store",
    "Restored": "conveyor.state.partition_stores",
    "State": "conveyor.state.view",
    "StateError": "conveyor.state.errors",
    "Store": "conveyor.state.store",
    "StoreCodecMismatchError": "conveyor.state.errors",
    "changelog_topic": "conveyor.state.changelogs",
}

__all__ = [
    "Aggregation",
    "ChangelogMismatchError",
    "Codec",
    "Collect",
    "Count",
    "Hopping",
    "Latest",
    "Max",
    "Mean",
    "Min",
    "Reduce",
    "Restored",
    "Session",
    "State",
    "StateError",
    "Store",
    "StoreCodecMismatchError",
    "Sum",
    "Tumbling",
    "WindowResult",
    "Windowed",
    "changelog_topic",
]


def __getattr__(name: str) -> _Any:
    """One of :data:`_ON_FIRST_USE`, imported now (and kept)."""
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})
