"""The topics the web UI lives on, declared once: names, partitions and configs.

Nothing else is stored anywhere: no database. Reports are short-lived (the aggregator folds
them), states and metrics are compacted (the newest value per key is all that matters) and
errors are kept for a few days.
"""

from __future__ import annotations

from dataclasses import dataclass

from conveyor.routing.topic import Topic

__all__ = ["LABEL", "WebTopics"]

LABEL = "conveyor.web"
"""The label of every message the web UI's parts produce: errors about them are not
reported again (a failing errors topic must not feed itself)."""

_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class WebTopics:
    """The names of the web UI's topics (override them to run two UIs on one cluster)."""

    reports: str = "conveyor_consumers_reports"
    """Every process publishes its report here every ``tracking_interval``."""
    states: str = "conveyor_consumers_states"
    """Compacted: the newest state of each process, keyed by process id."""
    metrics: str = "conveyor_consumers_metrics"
    """Compacted: the time-bucketed series, one key per resolution."""
    errors: str = "conveyor_errors"
    """Every error a process saw, with its traceback and context."""
    commands: str = "conveyor_consumers_commands"
    """Commands to processes (quiet, stop, probe, pause, resume, seek) and their results."""
    group: str = "conveyor_web"
    """The aggregators' consumer group."""

    @classmethod
    def prefixed(cls, prefix: str) -> WebTopics:
        """All five topics and the group named ``{prefix}_...`` (two UIs on one cluster);
        ``"staging"`` and ``"staging_"`` both give ``staging_consumers_reports`` ..."""
        prefix = prefix.removesuffix("_")
        if not prefix:
            raise ValueError("WebTopics.prefixed needs a prefix, such as 'staging'")
        return cls(
            reports=f"{prefix}_consumers_reports",
            states=f"{prefix}_consumers_states",
            metrics=f"{prefix}_consumers_metrics",
            errors=f"{prefix}_errors",
            commands=f"{prefix}_consumers_commands",
            group=f"{prefix}_web",
        )

    @property
    def names(self) -> tuple[str, ...]:
        return (self.reports, self.states, self.metrics, self.errors, self.commands)

    def declared(self, replication_factor: int | None = None) -> list[Topic]:
        """The topics as declarative routes (inactive), for ``plan`` / ``migrate``, with
        ``replication_factor`` replicas (``None``: the cluster's default)."""
        compacted = {
            "cleanup.policy": "compact",
            "segment.ms": str(3600 * 1000),
            "min.cleanable.dirty.ratio": "0.1",
            "max.message.bytes": str(8 * 1024 * 1024),
        }
        configs = {
            self.reports: {
                "cleanup.policy": "delete",
                "retention.ms": str(_DAY_MS),
                "segment.ms": str(3600 * 1000),
                "max.message.bytes": str(8 * 1024 * 1024),
            },
            self.states: compacted,
            self.metrics: compacted,
            self.errors: {
                "cleanup.policy": "delete",
                "retention.ms": str(3 * _DAY_MS),
                "max.message.bytes": str(1024 * 1024),
            },
            self.commands: {  # read from their end: a command is not replayed later
                "cleanup.policy": "delete",
                "retention.ms": str(_DAY_MS),
                "max.message.bytes": str(8 * 1024 * 1024),  # a probe of many threads
            },
        }
        return [
            Topic(
                name=name,
                consumer_class=None,
                consumer_group=self.group,
                subscription_group=self.group,
                active=False,
                partitions=1,
                replication_factor=replication_factor,
                config=config,
            )
            for name, config in configs.items()
        ]
