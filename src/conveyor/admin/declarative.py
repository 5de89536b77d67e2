"""Declarative topics: compare what the routes declare with the cluster; apply the difference.

``plan`` lists what would change (``+`` create, ``~`` change a config or grow partitions,
``!`` what cannot be done, such as shrinking a topic) and what is worth a warning (``*``: a
topic with one replica on a cluster of three or more brokers); ``migrate`` applies
creations, partition increases and config changes; ``align`` applies config changes only.
Topics that exist on the cluster but are not declared are left alone; nothing is ever
deleted. A topic declared without a replication factor is created with the cluster's
``default.replication.factor`` (KIP-464), and the plan says which factor that is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property

from conveyor.admin.admin import Admin, Replication
from conveyor.errors import ConveyorError
from conveyor.routing.topic import Topic
from conveyor.state.changelogs import changelog_routes

__all__ = ["Change", "align", "migrate", "plan"]

_SYMBOLS = {"create": "+", "config": "~", "partitions": "~", "impossible": "!", "warning": "*"}


@dataclass(frozen=True)
class Change:
    """One difference between the routes and the cluster."""

    kind: str
    """``create``, ``config``, ``partitions``, ``impossible`` or ``warning`` (nothing to apply:
    something the operator should know, such as a topic with one replica on a cluster of
    three or more brokers)."""
    topic: str
    detail: str
    partitions: int | None = None
    replication_factor: int | None = None
    """The replication factor a creation asks for (``None``: the cluster's default)."""
    replicas: int | None = None
    """The replication factor the topic gets or has (read from the cluster; ``None``: the
    cluster would not say its default)."""
    config: dict[str, str] = field(default_factory=dict)
    setting: str | None = None
    current: str | None = None
    wanted: str | None = None
    applied: bool = False
    error: str | None = None

    @property
    def symbol(self) -> str:
        return _SYMBOLS[self.kind]

    def as_dict(self) -> dict[str, object]:
        return {
            "symbol": self.symbol,
            "kind": self.kind,
            "topic": self.topic,
            "detail": self.detail,
            "partitions": self.partitions,
            "replication_factor": self.replicas,
            "setting": self.setting,
            "current": self.current,
            "wanted": self.wanted,
            "applied": self.applied,
            "error": self.error,
        }


def _declared(routes: Iterable[Topic]) -> list[Topic]:
    seen: dict[str, Topic] = {}
    for route in routes:
        if route.pattern is not None:  # names no one topic: nothing to declare
            continue
        if route.kafka.get("bootstrap.servers"):  # on a cluster of its own, not this admin's
            continue
        if route.name not in seen:
            seen[route.name] = route
    return list(seen.values())


class _Cluster:
    """What a plan asks the cluster about replicas, each asked once and only when needed: the
    broker count for the warnings, the default factor for a creation."""

    def __init__(self, admin: Admin) -> None:
        self._admin = admin

    @cached_property
    def brokers(self) -> int:
        return len(self._admin.cluster_info().brokers)

    @cached_property
    def replication(self) -> Replication:
        return Replication(self.brokers, self._admin.default_replication_factor())

    def under_replicated(self, factor: int) -> bool:
        return Replication(self.brokers, None).under_replicated(factor)


def _one_replica(topic: str, replicas: int, brokers: int) -> Change:
    return Change(
        "warning",
        topic,
        f"one replica on a cluster of {brokers} brokers: its data is lost with that broker, and "
        "acks=all producers are refused while min.insync.replicas is above 1 (declare "
        "replication_factor=None for the cluster's default, or 3)",
        replicas=replicas,
    )


def plan(admin: Admin, routes: Iterable[Topic]) -> list[Change]:
    """What ``migrate`` would do, topic by topic (an empty list: nothing to do), and the
    warnings worth an operator's eye (``kind == "warning"``; ``migrate`` leaves them)."""
    existing = set(admin.list_topics(internal=True))
    cluster = _Cluster(admin)
    changes: list[Change] = []
    routes = list(routes)
    if any(route.state for route in routes):  # and the changelogs of their stores
        routes += changelog_routes(routes, admin.partition_counts())
    for route in _declared(routes):
        if route.name not in existing:
            partitions = route.partitions or 1
            replication = cluster.replication
            replicas = replication.factor(route.replication_factor)
            factor = f"replication factor {replicas if replicas is not None else 'unknown'}" + (
                " (the cluster's default)" if route.replication_factor is None else ""
            )
            configs = ", ".join(f"{k}={v}" for k, v in sorted(route.config.items()))
            changes.append(
                Change(
                    "create",
                    route.name,
                    f"create with {partitions} partition(s), {factor}"
                    + (f", {configs}" if configs else ""),
                    partitions=partitions,
                    replication_factor=route.replication_factor,
                    replicas=replicas,
                    config=dict(route.config),
                )
            )
            if replicas is not None and replication.under_replicated(replicas):
                changes.append(_one_replica(route.name, replicas, replication.brokers))
            continue
        info = admin.topic_info(route.name)
        if route.partitions is not None and route.partitions != info.partition_count:
            if route.partitions > info.partition_count:
                changes.append(
                    Change(
                        "partitions",
                        route.name,
                        f"partitions: {info.partition_count} => {route.partitions}",
                        partitions=route.partitions,
                        current=str(info.partition_count),
                        wanted=str(route.partitions),
                    )
                )
            else:
                changes.append(
                    Change(
                        "impossible",
                        route.name,
                        f"partitions: {info.partition_count} => {route.partitions} (Kafka cannot remove partitions)",
                        current=str(info.partition_count),
                        wanted=str(route.partitions),
                    )
                )
        current_rf = len(info.partitions[0].replicas) if info.partitions else None
        if route.replication_factor not in (None, current_rf) and current_rf is not None:
            changes.append(
                Change(
                    "impossible",
                    route.name,
                    f"replication factor: {current_rf} => {route.replication_factor} (reassign replicas by hand)",
                    current=str(current_rf),
                    wanted=str(route.replication_factor),
                )
            )
        if current_rf is not None and cluster.under_replicated(current_rf):
            changes.append(_one_replica(route.name, current_rf, cluster.brokers))
        if route.config:
            current = admin.describe_configs("topic", route.name)
            for setting, wanted in sorted(route.config.items()):
                entry = current.get(setting)
                if entry is None:
                    changes.append(
                        Change(
                            "impossible",
                            route.name,
                            f"{setting}: not a topic config Kafka knows",
                            setting=setting,
                            wanted=wanted,
                        )
                    )
                elif entry.value != wanted:
                    changes.append(
                        Change(
                            "config",
                            route.name,
                            f'{setting}: "{entry.value}" => "{wanted}"',
                            setting=setting,
                            current=entry.value,
                            wanted=wanted,
                        )
                    )
    return changes


def migrate(admin: Admin, routes: Iterable[Topic], configs_only: bool = False) -> list[Change]:
    """Apply the plan (creations, partition increases, config changes); return every change with
    ``applied`` set, or ``error`` when Kafka refused it. Impossible changes are not attempted."""
    results: list[Change] = []
    for change in plan(admin, routes):
        if change.kind in ("impossible", "warning") or (configs_only and change.kind != "config"):
            results.append(change)
            continue
        try:
            if change.kind == "create":
                admin.create_topic(
                    change.topic, change.partitions or 1, change.replication_factor, change.config
                )
            elif change.kind == "partitions":
                admin.create_partitions(change.topic, change.partitions or 1)
            elif change.kind == "config":
                admin.alter_configs("topic", change.topic, {change.setting or "": change.wanted})
        except ConveyorError as exc:
            results.append(_replace(change, error=str(exc)))
            continue
        results.append(_replace(change, applied=True))
    return results


def align(admin: Admin, routes: Iterable[Topic]) -> list[Change]:
    """Apply config changes only (no creations, no partition changes)."""
    return [
        change
        for change in migrate(admin, routes, configs_only=True)
        if change.kind in ("config", "impossible", "warning")
    ]


def _replace(change: Change, **updates: object) -> Change:
    return replace(change, **updates)  # type: ignore[arg-type]
