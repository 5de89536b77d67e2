"""The stores' changelog topics: one per store of a route, compacted, with as many partitions as
the route's topic (partition ``p`` of the changelog backs partition ``p`` of the topic).

``conveyor topics plan | migrate`` lists and creates them with the routes' topics
(:func:`changelog_routes`); an app creates the ones still missing when it starts
(:func:`ensure_changelogs`) and refuses to start when one has the wrong partition count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.admin.admin import Admin
    from conveyor.routing.topic import Topic

__all__ = [
    "CHANGELOG_CONFIG",
    "changelog_routes",
    "changelog_topic",
    "check_co_partitioned",
    "ensure_changelogs",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def changelog_topic(group: str, topic: str, store: str) -> str:
    """The changelog topic of ``store`` on ``topic`` in consumer group ``group``."""
    return _UNSAFE.sub("_", f"{group}-{topic}-{store}-changelog")[:249]


CHANGELOG_CONFIG = {"cleanup.policy": "compact"}
"""A changelog keeps each key's last value: a restore reads the store's size, not its history."""


def changelog_routes(routes: Iterable[Topic], partition_counts: dict[str, int]) -> list[Topic]:
    """The changelog topics the routes' stores need, as declared topics (for the plan): each
    with its route's partition count (declared, else the topic's on the cluster, else 1)."""
    found: list[Topic] = []
    for route in routes:
        if not route.state or route.pattern is not None:
            continue
        partitions = route.partitions or partition_counts.get(route.name) or 1
        for name, store in route.state.items():
            if not store.changelog or store.source is not None:
                continue  # (a table's topic is its changelog)
            found.append(
                replace(
                    route,
                    name=changelog_topic(route.consumer_group, route.name, name),
                    consumer_class=None,
                    active=False,
                    partitions=partitions,
                    config=CHANGELOG_CONFIG,
                    state={},
                )
            )
    return found


def check_co_partitioned(routes: Iterable[Topic], counts: dict[str, int]) -> None:
    """Each table a route looks up has as many partitions as the route's topic: partition
    ``p`` of the table holds the keys of partition ``p`` of the stream.

    Raises:
        ConfigurationError: a table's topic is missing, or its partition count differs.
    """
    for route in routes:
        if route.pattern is not None:
            continue
        for name, store in route.state.items():
            if store.source is None:
                continue
            have, wanted = counts.get(store.source), counts.get(route.name, route.partitions)
            what, option = (
                ("joins the stream", "join") if store.stream else ("looks up the table", "tables")
            )
            if have is None:
                raise ConfigurationError(
                    f"routes.topic({route.name!r}) {what} {store.source!r} ({name}), which does "
                    "not exist: create it (conveyor topics migrate)",
                    option,
                )
            if wanted is not None and have != wanted and not store.global_table:
                raise ConfigurationError(
                    f"routes.topic({route.name!r}) has {wanted} partitions and {store.source!r} "
                    f"({name}) {have}: it {what} partition by partition (partition p with "
                    "partition p), so both must be keyed alike with as many partitions "
                    "(co-partitioned). Repartition one of them.",
                    option,
                )


def ensure_changelogs(admin: Admin, routes: Iterable[Topic]) -> list[str]:
    """Create the changelogs that do not exist yet; returns their names.

    Raises:
        ConfigurationError: a changelog's partition count differs from its topic's (its
            partition ``p`` would not back the topic's partition ``p``).
        KafkaError: the cluster refused a creation (e.g. no permission to create topics).
    """
    counts = admin.partition_counts()
    routes = list(routes)
    check_co_partitioned(routes, counts)
    created: list[str] = []
    for changelog in changelog_routes(routes, counts):
        wanted = changelog.partitions or 1
        have = counts.get(changelog.name)
        if have is None:
            admin.create_topic(
                changelog.name,
                wanted,
                replication_factor=changelog.replication_factor,
                config=changelog.config,
            )
            created.append(changelog.name)
        elif have != wanted:
            raise ConfigurationError(
                f"the changelog {changelog.name} has {have} partitions and its topic {wanted}: "
                "each partition of a store is backed by the changelog partition of the same "
                "number. Recreate the changelog with the topic's count (its stores are rebuilt "
                "from it), or give the topic back its count.",
                "state",
            )
    return created
