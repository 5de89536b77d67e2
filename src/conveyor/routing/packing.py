"""Listener packing: the routes that declare no subscription group, spread over a bounded
number of listeners, evenly by partition count.

A listener is one thread and one librdkafka consumer. The routes of a consumer group declared
outside any ``app.routes.subscription_group(...)`` block are spread over up to the app's
``max_listeners`` listeners of that same consumer group: several members of one group, each
subscribed to its own topics (as Karafka's subscription groups are). The spread is a greedy
bin-packing of their partition counts: the heaviest topic first, each into the listener that
has the fewest partitions so far, ties broken by name, so that every process of the app packs
its routes alike when it sees the same partition counts.

What a topic weighs: its partition count in the cluster's metadata when the app starts; for a
topic the metadata does not know (not created yet, or the cluster did not answer in time), the
route's declared ``partitions``, else 1. A direct assignment weighs its listed partitions; a
pattern route weighs the partitions of every topic it matches at start (at least 1); the
patterns of a consumer group are packed together, with the routes by name they match (a
pattern and a route that both read a topic must share a listener, or two members of the group
would split that topic's partitions). Routes inside a ``subscription_group`` block keep their
own listener and do not count against ``max_listeners``; direct assignments are not packed
(their streams merge in one consumer), nor is anything of an app with static membership
(``group.instance.id``: one id in two consumers of a group would fence one of them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.routing.topic import Topic

__all__ = ["PartitionCounts", "pack", "pack_name", "pack_routes"]

PartitionCounts = Callable[[Mapping[str, Any]], Mapping[str, int]]
"""Given the own kafka settings of a set of routes (``{}`` for the app's cluster), the
partition count of every topic of their cluster (topics it cannot tell are left out)."""


def pack(weights: Mapping[str, int], bins: int) -> list[list[str]]:
    """Spread the names of ``weights`` over at most ``bins`` lists with sums as even as a
    greedy packing gets (largest first, each into the lightest list so far; at most 4/3 of
    the best possible heaviest list): ``min(bins, len(weights))`` lists, none empty, each in
    the order its names went in. Deterministic: equal weights go by name, equal lists by
    position. A weight below 1 counts as 1.

    Raises:
        ValueError: ``bins`` below 1.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    loads = [0] * min(bins, len(weights))
    packed: list[list[str]] = [[] for _ in loads]
    for name in sorted(weights, key=lambda item: (-max(1, weights[item]), item)):
        lightest = min(range(len(loads)), key=lambda index: (loads[index], index))
        loads[lightest] += max(1, weights[name])
        packed[lightest].append(name)
    return packed


def pack_name(subscription_group: str, index: int) -> str:
    """The subscription group (and listener) name of pack ``index`` (from 1) of a consumer
    group's routes: ``shop-pack-1``, ``shop-pack-2``."""
    return f"{subscription_group}-pack-{index}"


def pack_routes(
    routes: list[Topic],
    max_listeners: int,
    default_initial: str,
    partition_counts: PartitionCounts,
    static_member: bool = False,
) -> list[Topic]:
    """``routes`` with the subscription group of each route that declared none replaced by
    its pack's (:func:`pack_name`), when its consumer group's such routes need more than one
    listener; every other route as it was, all in their order. ``partition_counts`` is asked
    once per distinct set of the routes' own kafka settings, and only when there is
    something to pack. ``default_initial`` is the app's ``auto.offset.reset``: routes that
    start elsewhere are read by another listener, so they are packed apart. ``static_member``:
    the app's settings give a ``group.instance.id`` (static membership): nothing is packed."""
    sets: dict[tuple[Any, ...], list[Topic]] = {}
    for route in routes:
        # Not packed: routes in a declared subscription group; direct assignments (no group
        # membership to spread, and their streams merge in one consumer); routes of a static
        # member (one group.instance.id in two consumers of a group would fence one of them).
        if (
            not route.subscription_group_declared
            and not route.direct
            and not static_member
            and "group.instance.id" not in route.kafka
        ):
            own = tuple(sorted(route.kafka.items()))
            key = (
                route.consumer_group,
                route.subscription_group,
                route.direct,
                route.initial_offset or default_initial,
                own,
            )
            sets.setdefault(key, []).append(route)
    counts: dict[tuple[Any, ...], Mapping[str, int]] = {}
    packs: dict[int, str] = {}  # id(route) -> its pack's subscription group
    for key, members in sets.items():
        units = _units(members)
        if max_listeners < 2 or len(units) < 2:
            continue
        own = key[-1]
        if own not in counts:
            counts[own] = partition_counts(dict(own))
        named = {unit[0].name: unit for unit in units}
        weights = {name: _weight(unit, counts[own]) for name, unit in named.items()}
        for index, names in enumerate(pack(weights, max_listeners), 1):
            for name in names:
                for route in named[name]:
                    packs[id(route)] = pack_name(route.subscription_group, index)
    return [
        dataclasses.replace(route, subscription_group=packs[id(route)])
        if id(route) in packs
        else route
        for route in routes
    ]


def _units(routes: list[Topic]) -> list[list[Topic]]:
    """What must share a listener: each route by name alone, and each pattern with the routes
    by name it matches (and with any other pattern matching one of those). A unit's first
    route names it (the first declared, for a unit of several)."""
    units: list[list[Topic]] = [[route] for route in routes if route.pattern is None]
    patterns = [route for route in routes if route.pattern is not None]
    if not patterns:
        return units
    # All patterns of a set share one listener: two patterns may match the same topic (now, or
    # one created later), and two members subscribed to it would split its partitions.
    matched = [
        unit
        for unit in units
        if any(pattern.matches(route.name) for pattern in patterns for route in unit)
    ]
    units = [unit for unit in units if not any(unit is other for other in matched)]
    merged = [*patterns, *(route for unit in matched for route in unit)]
    units.append(sorted(merged, key=routes.index))
    return units


def _weight(unit: list[Topic], counts: Mapping[str, int]) -> int:
    """The partitions a unit's listener reads (see the module's docstring)."""
    named = {route.name for route in unit if route.pattern is None}
    total = 0
    for route in unit:
        if route.assign is not None:
            total += len(route.assign)
        elif route.pattern is None:
            total += counts.get(route.name) or route.partitions or 1
        else:
            total += sum(
                count
                for topic, count in counts.items()
                if topic not in named and not topic.startswith("__") and route.matches(topic)
            )
    return max(1, total)
