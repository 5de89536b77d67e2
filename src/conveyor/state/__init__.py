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
from conveyor.state.joins import Join, Joined
from conveyor.state.partition_stores import Restored
from conveyor.state.store import Codec, Store
from conveyor.state.view import State
from conveyor.state.windows import (
    Hopping,
    Session,
    Sliding,
    Tumbling,
    Windowed,
    WindowResult,
)

__all__ = [
    "Aggregation",
    "ChangelogMismatchError",
    "Codec",
    "Collect",
    "Count",
    "Hopping",
    "Join",
    "Joined",
    "Latest",
    "Max",
    "Mean",
    "Min",
    "Reduce",
    "Restored",
    "Session",
    "Sliding",
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
