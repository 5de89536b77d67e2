"""Listener packing spreads the routes without a declared subscription group over at most
``max_listeners`` listeners, evenly by partition count, the same way every time; declared
subscription groups, other consumer groups and routes read by other listeners are left alone."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer
from conveyor.routing import Routes, Topic
from conveyor.routing.packing import pack, pack_routes


class Noop(Consumer):
    def consume(self) -> None:
        pass


def routes() -> Routes:
    return App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:1"}).routes


def listeners(packed: list[Topic]) -> dict[str, list[str]]:
    """Subscription group -> the route names it reads."""
    found: dict[str, list[str]] = {}
    for route in packed:
        found.setdefault(route.subscription_group, []).append(route.name)
    return found


def counts_of(counts: Mapping[str, int]) -> Any:
    asked: list[dict[str, Any]] = []

    def partition_counts(own: Mapping[str, Any]) -> Mapping[str, int]:
        asked.append(dict(own))
        return counts

    partition_counts.asked = asked  # type: ignore[attr-defined]
    return partition_counts


class TestPack:
    def test_spreads_evenly_by_weight(self) -> None:
        """Largest first into the lightest bin: 8 | 4+2+1+1 here, sums 8 and 8."""
        bins = pack({"a": 8, "b": 4, "c": 2, "d": 1, "e": 1}, 2)
        assert bins == [["a"], ["b", "c", "d", "e"]]

    def test_never_more_bins_than_items_and_none_empty(self) -> None:
        assert pack({"a": 3, "b": 1}, 8) == [["a"], ["b"]]
        assert pack({}, 4) == []

    def test_one_bin_takes_everything(self) -> None:
        assert pack({"b": 1, "a": 1}, 1) == [["a", "b"]]

    def test_equal_weights_go_by_name_round_robin(self) -> None:
        assert pack({name: 1 for name in "dcba"}, 2) == [["a", "c"], ["b", "d"]]

    def test_deterministic_whatever_the_order_given(self) -> None:
        weights = {f"t{n}": n % 5 + 1 for n in range(20)}
        shuffled = list(weights.items())
        random.Random(7).shuffle(shuffled)
        assert pack(weights, 3) == pack(dict(shuffled), 3)

    def test_heaviest_bin_within_greedy_bound(self) -> None:
        """No bin exceeds the average by more than the heaviest single item (greedy's bound),
        over random inputs."""
        generator = random.Random(11)
        for _ in range(200):
            weights = {f"t{n}": generator.randint(1, 12) for n in range(generator.randint(1, 12))}
            bins = generator.randint(1, 5)
            packed = pack(weights, bins)
            assert len(packed) == min(bins, len(weights))
            assert sorted(name for names in packed for name in names) == sorted(weights)
            sums = [sum(weights[name] for name in names) for names in packed]
            assert max(sums) <= sum(weights.values()) / len(packed) + max(weights.values())

    def test_weights_below_one_count_as_one(self) -> None:
        assert pack({"a": 0, "b": 0, "c": 0}, 3) == [["a"], ["b"], ["c"]]

    def test_refuses_no_bins(self) -> None:
        with pytest.raises(ValueError, match="bins"):
            pack({"a": 1}, 0)


class TestPackRoutes:
    def test_four_topics_on_two_listeners(self) -> None:
        table = routes()
        for name in ("a", "b", "c", "d"):
            table.topic(name, Noop)
        partition_counts = counts_of({"a": 6, "b": 3, "c": 2, "d": 1})
        packed = pack_routes(table.active(), 2, "earliest", partition_counts)
        assert listeners(packed) == {"shop-pack-1": ["a"], "shop-pack-2": ["b", "c", "d"]}
        assert [route.name for route in packed] == ["a", "b", "c", "d"], "order kept"
        assert partition_counts.asked == [{}], "one metadata request, on the app's cluster"

    def test_one_listener_leaves_routes_alone_and_asks_nothing(self) -> None:
        table = routes()
        table.topic("a", Noop)
        table.topic("b", Noop)
        partition_counts = counts_of({})
        assert pack_routes(table.active(), 1, "earliest", partition_counts) == table.active()
        assert partition_counts.asked == []

    def test_a_lone_topic_keeps_the_group_name(self) -> None:
        table = routes()
        table.topic("a", Noop)
        partition_counts = counts_of({})
        packed = pack_routes(table.active(), 4, "earliest", partition_counts)
        assert listeners(packed) == {"shop": ["a"]}
        assert partition_counts.asked == []

    def test_unknown_topics_weigh_their_declared_partitions_else_one(self) -> None:
        table = routes()
        table.topic("known", Noop)
        table.topic("declared", Noop, partitions=5)
        table.topic("unknown", Noop)
        table.topic("other", Noop)
        packed = pack_routes(table.active(), 2, "earliest", counts_of({"known": 4}))
        assert listeners(packed) == {  # 5 + 1 beside 4 + 1
            "shop-pack-1": ["declared", "unknown"],
            "shop-pack-2": ["known", "other"],
        }

    def test_declared_subscription_groups_keep_theirs(self) -> None:
        """Some routes declare a subscription group and some do not: the declared ones keep
        their listener, the others are packed among themselves."""
        table = routes()
        table.topic("a", Noop)
        with table.subscription_group("slow"):
            table.topic("s1", Noop)
            table.topic("s2", Noop)
        table.topic("b", Noop)
        table.topic("c", Noop)
        packed = pack_routes(table.active(), 2, "earliest", counts_of({"a": 2, "b": 1, "c": 1}))
        assert listeners(packed) == {
            "shop-pack-1": ["a"],
            "slow": ["s1", "s2"],
            "shop-pack-2": ["b", "c"],
        }

    def test_each_consumer_group_is_packed_apart(self) -> None:
        table = routes()
        table.topic("a", Noop)
        table.topic("b", Noop)
        with table.consumer_group("billing"):
            table.topic("a", Noop)
            table.topic("c", Noop)
            table.topic("d", Noop)
        packed = pack_routes(table.active(), 2, "earliest", counts_of({}))
        by_group = {(r.consumer_group, r.name): r.subscription_group for r in packed}
        assert by_group == {
            ("shop", "a"): "shop-pack-1", ("shop", "b"): "shop-pack-2",
            ("billing", "a"): "billing-pack-1", ("billing", "c"): "billing-pack-2",
            ("billing", "d"): "billing-pack-1",
        }  # fmt: skip

    def test_routes_read_by_other_listeners_are_packed_apart(self) -> None:
        """Another initial offset or settings of their own already mean another listener: each
        such set is packed on its own; direct assignments are not packed (their streams merge
        in one consumer, as the routing guide promises)."""
        table = routes()
        table.topic("a", Noop)
        table.topic("late", Noop, initial_offset="latest")
        table.topic("d1", Noop, assign=[0, 1, 2])
        table.topic("d2", Noop, assign=[0])
        table.topic("d3", Noop, assign=[0])
        table.topic("e1", Noop, initial_offset="earliest")  # the app's default: with "a"
        packed = pack_routes(table.active(), 2, "earliest", counts_of({"a": 1, "e1": 1}))
        assert listeners(packed) == {
            "shop-pack-1": ["a"],
            "shop": ["late", "d1", "d2", "d3"],
            "shop-pack-2": ["e1"],
        }

    def test_a_static_member_is_not_packed(self) -> None:
        """One group.instance.id in two consumers of a group would fence one of them."""
        table = routes()
        table.topic("a", Noop)
        table.topic("b", Noop)
        table.topic("c", Noop, kafka={"group.instance.id": "worker-1"})
        table.topic("d", Noop, kafka={"group.instance.id": "worker-1"})
        static = pack_routes(table.active(), 2, "earliest", counts_of({}), static_member=True)
        assert {route.subscription_group for route in static} == {"shop"}
        own = {
            r.name: r.subscription_group
            for r in pack_routes(table.active(), 2, "earliest", counts_of({}))
        }
        assert own["c"] == own["d"] == "shop", "a route's own group.instance.id: not packed"
        assert {own["a"], own["b"]} == {"shop-pack-1", "shop-pack-2"}

    def test_patterns_share_one_listener(self) -> None:
        """Two patterns may match one topic (now or later): never on two members."""
        table = routes()
        table.pattern(r"^orders\..+$", Noop)
        table.pattern(r"^.+\.eu$", Noop)
        table.topic("big", Noop)
        table.topic("small", Noop)
        packed = pack_routes(table.active(), 2, "earliest", counts_of({"big": 6, "small": 1}))
        groups = {r.name: r.subscription_group for r in packed}
        assert groups[r"^orders\..+$"] == groups[r"^.+\.eu$"]

    def test_own_settings_ask_their_cluster(self) -> None:
        table = routes()
        other = {"bootstrap.servers": "other:9092"}
        table.topic("x", Noop, kafka=other)
        table.topic("y", Noop, kafka=other)
        partition_counts = counts_of({"x": 2, "y": 1})
        packed = pack_routes(table.active(), 2, "earliest", partition_counts)
        assert listeners(packed) == {"shop-pack-1": ["x"], "shop-pack-2": ["y"]}
        assert partition_counts.asked == [other]

    def test_a_pattern_shares_a_listener_with_the_named_routes_it_matches(self) -> None:
        table = routes()
        table.topic("orders.eu", Noop)
        table.topic("big", Noop)
        table.pattern(r"^orders\..+$", Noop)
        table.topic("small", Noop)
        counts = {"orders.eu": 2, "orders.us": 3, "big": 6, "small": 1, "__consumer_offsets": 50}
        packed = pack_routes(table.active(), 2, "earliest", counts_of(counts))
        assert listeners(packed) == {
            "shop-pack-2": ["orders.eu", r"^orders\..+$", "small"],
            "shop-pack-1": ["big"],
        }, "the pattern weighs orders.us (3) beside orders.eu (2), not the internal topic"


def test_max_listeners_is_checked_when_the_app_is_built() -> None:
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ConfigurationError, match="max_listeners") as raised:
            App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"}, max_listeners=bad)
        assert raised.value.setting == "max_listeners"
    app = App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"})
    assert app.settings.max_listeners == 2
