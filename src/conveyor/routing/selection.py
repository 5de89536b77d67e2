"""Route selection: the routes one start of an app runs (``app.run(topics=[...])``...).

The active routes, narrowed by the start's filters (consumer groups, subscription groups,
topics: each name must be some route's), once the routes are valid, each route's own kafka
settings pass with the app's, and no pattern would split a topic with a route by name between
two listeners of one consumer group. ``conveyor.routing.packing`` then spreads them over
listeners.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.driver.clients import check_settings
from conveyor.errors import ConfigurationError
from conveyor.settings import check_group_protocol

if TYPE_CHECKING:
    from conveyor.routing.routes import Routes
    from conveyor.routing.topic import Topic

__all__ = ["check_patterns", "select_routes"]


def select_routes(
    routes: Routes,
    kafka: Mapping[str, Any],
    consumer_groups: Iterable[str] | None,
    subscription_groups: Iterable[str] | None,
    topics: Iterable[str] | None,
) -> list[Topic]:
    """The active ``routes`` a start runs, of those filters that are not None (the app's
    ``kafka`` settings beneath each route's own).

    Raises:
        ConfigurationError: an invalid route, a route's kafka settings, a pattern that splits
            a topic (see :func:`check_patterns`), a filter naming what no route has, or
            filters that leave no route.
    """
    routes.validate()
    chosen = routes.active()
    check_patterns(chosen)
    for route in chosen:  # a route's own settings with the app's, as its listener has them
        if route.kafka:
            merged = {**kafka, **route.kafka}
            check_group_protocol(merged, f"routes.topic({route.name!r}) kafka")
            check_settings({**merged, "enable.auto.commit": False}, "consumer")
    for name, wanted, attribute in (
        ("consumer group", consumer_groups, "consumer_group"),
        ("subscription group", subscription_groups, "subscription_group"),
        ("topic", topics, "name"),
    ):
        if wanted is None:
            continue
        names = set(wanted)
        known = {getattr(route, attribute) for route in routes.active()}
        missing = sorted(names - known)
        if missing:
            raise ConfigurationError(
                f"no route has {name} {missing[0]!r}; known: {', '.join(sorted(known))}",
                attribute,
            )
        chosen = [route for route in chosen if getattr(route, attribute) in names]
    if not chosen:
        raise ConfigurationError("the filters leave no route to consume", "routes")
    return chosen


def check_patterns(routes: list[Topic]) -> None:
    """A pattern and a route by name of one consumer group must share a listener when the
    pattern matches the name: two librdkafka consumers of one group subscribed to the same
    topic would split its partitions between the two routes.

    Raises:
        ConfigurationError: such a pair (naming both).
    """
    for pattern in (route for route in routes if route.pattern is not None):
        for named in routes:
            if (
                named.pattern is None
                and named.consumer_group == pattern.consumer_group
                and pattern.matches(named.name)
                and (named.subscription_group, named.initial_offset, dict(named.kafka))
                != (pattern.subscription_group, pattern.initial_offset, dict(pattern.kafka))
            ):
                raise ConfigurationError(
                    f"routes.pattern({pattern.name!r}) matches topic {named.name!r}, routed by "
                    "name in the same consumer group but read by another listener (another "
                    "subscription group, initial_offset or kafka settings): give them the same "
                    "ones, or another consumer group",
                    "pattern",
                )
