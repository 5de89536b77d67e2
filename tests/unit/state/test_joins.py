"""Stream-stream joins without a broker: a join over two stores in memory, fed as the engine
feeds it (the left side's batches, the right side's records written by the follower): pairs in
both directions and once each, the window's bounds, late messages, a failed batch, a restart
and forgetting what is too old to pair."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer
from conveyor.messages import Deserializers, Message
from conveyor.serialization import json_dumps
from conveyor.state import Join, Store
from conveyor.state.backends import MemoryBackend
from conveyor.state.joins import PartitionJoin, stream_row
from conveyor.state.view import State, StreamBuffer
from conveyor.testing import Record

SECOND = 1_000


class Partition:
    """A consumer of ``orders`` partition 0 as its join sees it, with the join's two stores
    over backends that outlive it (a restart keeps them)."""

    def __init__(self, join: Join, backends: dict[str, MemoryBackend] | None = None) -> None:
        self.backends = backends or {name: MemoryBackend() for name in join.stores()}
        self.stores: dict[str, Any] = {
            name: (StreamBuffer if store.stream else State)(name, store, self.backends[name])
            for name, store in join.stores().items()
        }
        self.topic, self.partition = "orders", 0
        self.route = SimpleNamespace(deserializers=Deserializers())
        self.join = PartitionJoin(join, self)
        self.right_offset = 0

    def left(self, *fed: tuple[str, int, Any], first: int = 0) -> list[Message]:
        """Messages of the left side: (key, timestamp ms, payload), from offset ``first``."""
        return [
            Message(Record("orders", 0, first + i, json_dumps(p), k.encode(), None, at),
                    Deserializers())
            for i, (k, at, p) in enumerate(fed)
        ]  # fmt: skip

    def right(self, *fed: tuple[str, int, Any]) -> None:
        """Records of the right side arriving: written as the follower writes them."""
        buffer = self.stores["join.right"]
        for key, at, payload in fed:
            raw = Record("payments", 0, self.right_offset, json_dumps(payload), key.encode(),
                         None, at)  # fmt: skip
            buffer.put_from_topic(dict([stream_row(raw)]))
            self.right_offset += 1

    def ended_well(self) -> None:
        self.stores["join"].keep()

    def flushed(self) -> None:
        state = self.stores["join"]
        self.backends["join"].write(state.changes(), {})
        state.applied()


def pairs(joined: list[Any]) -> list[tuple[Any, Any, Any]]:
    return [(j.key, j.left.payload, j.right.payload) for j in joined]


def test_a_pair_is_found_once_whichever_side_comes_first() -> None:
    p = Partition(Join("payments", within=10))
    p.right(("a", 1 * SECOND, "pay-a"))
    assert pairs(
        p.join.update(p.left(("a", 5 * SECOND, "order-a"), ("b", 5 * SECOND, "order-b")))
    ) == [("a", "order-a", "pay-a")]
    p.ended_well()
    p.right(("b", 14 * SECOND, "pay-b"), ("b", 16 * SECOND, "pay-b-late"))
    assert pairs(p.join.tick()) == [("b", "order-b", "pay-b")], "within 10 s only"
    p.ended_well()
    assert pairs(p.join.update(p.left(("c", 16 * SECOND, "order-c"), first=2))) == []
    assert p.join.tick() == [], "a right record pairs once"


def test_the_window_s_bounds_are_inclusive_and_keys_must_match() -> None:
    p = Partition(Join("payments", within=10))
    p.right(("a", 0, "early"), ("a", 20 * SECOND, "late"), ("x", 10 * SECOND, "other key"))
    joined = p.join.update(p.left(("a", 10 * SECOND, "order")))
    assert pairs(joined) == [("a", "order", "early"), ("a", "order", "late")]
    assert [j.right.offset for j in joined] == [0, 1]
    assert joined[0].right.topic == "payments"
    assert joined[0].left.topic == "orders"


def test_a_message_older_than_stream_time_less_within_and_grace_is_late() -> None:
    p = Partition(Join("payments", within=10, grace=5))
    p.join.update(p.left(("a", 100 * SECOND, "now")))
    p.right(("b", 86 * SECOND, "pay-b"))
    assert p.join.update(p.left(("b", 85 * SECOND, "on time"), ("b", 84 * SECOND, "late"), first=1))
    assert [m.payload for m in p.join.late] == ["late"]
    assert p.stores["join"].late == 1, "counted for the Stores page"


def test_a_failed_batch_is_paired_again_from_what_the_stores_held() -> None:
    p = Partition(Join("payments", within=10))
    p.join.update(p.left(("a", 1 * SECOND, "order-1")))
    p.ended_well()
    p.right(("a", 2 * SECOND, "pay"))
    first = pairs(p.join.update(p.left(("a", 3 * SECOND, "order-2"), first=1)))
    p.stores["join"].discard()  # the batch failed: its messages and probed offset are gone
    again = pairs(p.join.update(p.left(("a", 3 * SECOND, "order-2"), first=1)))
    assert first == again == [("a", "order-1", "pay"), ("a", "order-2", "pay")]


def test_a_failed_batch_that_forgot_a_right_record_finds_it_again_on_its_retry() -> None:
    """A batch whose later message makes a right record too old to pair, after an earlier
    message of it paired with that record, fails: its retry pairs the earlier message again
    (the record stays in the right store until a durable stream time forgot it)."""
    p = Partition(Join("payments", within=10))
    p.right(("a", 100 * SECOND, "pay"))
    assert p.join.tick() == []
    p.ended_well()
    p.flushed()
    batch = [("a", 105 * SECOND, "order"), ("z", 125 * SECOND, "later")]
    assert pairs(p.join.update(p.left(*batch))) == [("a", "order", "pay")]
    p.stores["join"].discard()  # the batch failed
    assert pairs(p.join.update(p.left(*batch))) == [("a", "order", "pay")], "found again"


def test_after_a_restart_only_the_right_records_not_yet_paired_are_paired() -> None:
    join = Join("payments", within=10)
    p = Partition(join)
    p.join.update(p.left(("a", 1 * SECOND, "order")))
    p.right(("a", 2 * SECOND, "pay-1"))
    assert len(p.join.tick()) == 1
    p.ended_well()
    p.flushed()
    p.right(("a", 3 * SECOND, "pay-2"))  # came while the process was down
    restarted = Partition(join, p.backends)
    assert pairs(restarted.join.tick()) == [("a", "order", "pay-2")]
    joined = restarted.join.update(restarted.left(("a", 4 * SECOND, "order-2"), first=1))
    assert pairs(joined) == [("a", "order-2", "pay-1"), ("a", "order-2", "pay-2")]


def test_what_is_too_old_to_pair_is_forgotten_on_both_sides() -> None:
    p = Partition(Join("payments", within=10, grace=5))
    p.right(("a", 1 * SECOND, "pay"))
    p.join.update(p.left(("a", 1 * SECOND, "order")))
    p.ended_well()
    assert len(list(p.backends["join.right"].items())) == 1
    p.join.update(p.left(("z", 27 * SECOND, "later"), first=1))  # 27 - 2 * 10 - 5 > 1
    p.ended_well()
    assert len(list(p.backends["join.right"].items())) == 1, "until the stream time is durable"
    p.flushed()
    p.join.tick()
    p.ended_well()
    assert list(p.backends["join.right"].items()) == []
    assert sorted(p.stores["join"]) == [b"o" + (1).to_bytes(8, "big"), b"probed", b"stream-time"]


def test_a_join_is_declared_on_the_consumer_and_its_topic_checked() -> None:
    class Paid(Consumer):
        join = Join("payments", within=60)

        def consume(self) -> None:
            pass

    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})
    stores = app.routes.topic("orders", Paid).state
    assert stores["join"] == Store(keys="bytes", values="bytes")
    assert stores["join.right"].source == "payments"
    assert stores["join.right"].stream
    with pytest.raises(ConfigurationError, match="topic name"):
        Join("", within=1)
    with pytest.raises(ConfigurationError, match="within"):
        Join("payments", within=0)
    with pytest.raises(ConfigurationError, match="needs a store named 'join'"):
        app.routes.topic("orders2", Paid, state={"join": Store()})
