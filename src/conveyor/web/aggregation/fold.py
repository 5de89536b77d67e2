"""Folding reports into what the web UI shows: the newest state of each process and the
metric series at three resolutions. Pure logic (no Kafka); :mod:`conveyor.web.aggregation.aggregator`
feeds it from the reports topic and publishes what it holds.

Folding is idempotent: a report whose ``seq`` is not newer than the process's last one is
ignored, and rates come from the difference of two reports' totals, so the reports that an
aggregator reads again after a restart change nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RESOLUTIONS", "Aggregate", "Resolution", "process_status"]


@dataclass(frozen=True)
class Resolution:
    """One series: buckets of ``seconds``, ``count`` of them kept."""

    name: str
    seconds: int
    count: int

    @property
    def span(self) -> int:
        return self.seconds * self.count


RESOLUTIONS = (
    Resolution("minute", 60, 60),  # an hour
    Resolution("ten_minutes", 600, 144),  # a day
    Resolution("hour", 3600, 168),  # a week
)

DEAD_AFTER_INTERVALS = 3
"""A process that sent no report for this many of its intervals is dead."""

_SLOWEST_KEPT = 10
_SLOWEST_WINDOW = 3600.0


def process_status(state: Mapping[str, Any], now: float) -> str:
    """``running``, ``quiet``, ``stopping``, ``stopped`` (said so in its last report) or
    ``dead`` (silent for 3 intervals)."""
    reported = str(state.get("state", "running"))
    if reported == "stopped":
        return "stopped"
    interval = float(state.get("interval") or 5.0)
    if now - float(state.get("reported_at") or 0.0) > DEAD_AFTER_INTERVALS * interval:
        return "dead"
    return reported


class Aggregate:
    """The folded view: ``states`` (process id -> state) and ``series`` (resolution name ->
    bucket start -> point).

    A point holds ``messages`` and ``errors`` (counted in the bucket), and the gauges as last
    seen in it: ``lag`` (topic -> messages behind), ``utilization`` (0-1, mean of live
    processes), ``rss`` (bytes, all live processes) and ``processes`` (live ones).
    """

    def __init__(self, forget_after: float = 3600.0) -> None:
        self.forget_after = forget_after
        self.states: dict[str, dict[str, Any]] = {}
        self.series: dict[str, dict[int, dict[str, Any]]] = {r.name: {} for r in RESOLUTIONS}
        self.changed: set[str] = set()
        """Process ids whose state changed since :meth:`take_changes` (forgotten ones too)."""
        self.folded = 0
        self.malformed = 0

    # -- restoring ------------------------------------------------------------------------------

    def load_state(self, process: str, state: Mapping[str, Any] | None) -> None:
        """Restore one process's state as published earlier (``None``: it was forgotten)."""
        if state is None:
            self.states.pop(process, None)
        else:
            self.states[process] = dict(state)

    def load_series(self, document: Mapping[str, Any]) -> None:
        """Restore one resolution's series as published earlier (:meth:`series_document`)."""
        name = document.get("resolution")
        if name not in self.series:
            return
        self.series[str(name)] = {
            int(point["t"]): dict(point) for point in document.get("points", ()) if "t" in point
        }

    # -- folding --------------------------------------------------------------------------------

    def fold(self, report: Mapping[str, Any], received_at: float) -> bool:
        """Fold one checked report (see :func:`~conveyor.web.reports.parse_report`); returns
        False when it was not newer than what is known of its process."""
        pid = str(report["id"])
        previous = self.states.get(pid)
        if previous is not None and int(report["seq"]) <= int(previous.get("seq", -1)):
            return False
        at = float(report["at"])
        counters = report["counters"]
        old = previous.get("counters", {}) if previous is not None else {}
        if previous is not None and old.get("processed", 0) > counters.get("processed", 0):
            old = {}  # counters went back: a restarted process kept its id (not ours); start over
        messages = max(0, int(counters.get("processed", 0)) - int(old.get("processed", 0)))
        errors = max(0, int(counters.get("errors", 0)) - int(old.get("errors", 0)))
        busy = max(
            0.0, float(counters.get("busy_seconds", 0.0)) - float(old.get("busy_seconds", 0.0))
        )
        elapsed = at - float(previous["reported_at"]) if previous is not None else 0.0
        pool = report.get("pool") or {}
        size = int(pool.get("size") or 0)
        if elapsed > 0 and size > 0:
            utilization = min(1.0, busy / (elapsed * size))
        else:
            utilization = float(pool.get("utilization") or 0.0)
        process = report["process"]
        state = {
            "id": pid,
            "client_id": report["client_id"],
            "seq": int(report["seq"]),
            "interval": float(report["interval"]),
            "reported_at": at,
            "received_at": received_at,
            "hostname": process.get("hostname"),
            "pid": process.get("pid"),
            "swarm_node": process.get("swarm_node"),
            "swarm_supervisor": process.get("swarm_supervisor"),
            "started_at": process.get("started_at"),
            "state": process.get("state", "running"),
            "rss": int(process.get("rss") or 0),
            "cpu": float(process.get("cpu") or 0.0),
            "threads": int(process.get("threads") or 0),
            "utilization": round(utilization, 4),
            "messages_per_second": round(messages / elapsed, 3) if elapsed > 0 else 0.0,
            "errors_per_second": round(errors / elapsed, 3) if elapsed > 0 else 0.0,
            "counters": dict(counters),
            "pool": pool,
            "listeners": list(report.get("listeners", ())),
            "partitions": list(report.get("partitions", ())),
            "jobs": list(report.get("jobs", ())),
            "lag": sum(p.get("lag") or 0 for p in report.get("partitions", ())),
            "slowest": _slowest(previous, report.get("slowest", ()), at),
            "latency": dict(report.get("latency") or {}),
            "job_queues": _job_queues(report.get("job_queues")),
            "stores": list(report.get("stores", ())),
        }
        self.states[pid] = state
        self.changed.add(pid)
        self.folded += 1
        self._add_to_series(at, messages, errors)
        return True

    def _add_to_series(self, at: float, messages: int, errors: int) -> None:
        gauges = self.gauges(at)
        for resolution in RESOLUTIONS:
            start = int(at // resolution.seconds) * resolution.seconds
            points = self.series[resolution.name]
            point = points.get(start)
            if point is None:
                point = points[start] = {"t": start, "messages": 0, "errors": 0}
            point["messages"] += messages
            point["errors"] += errors
            point.update(gauges)
            oldest = start - resolution.span
            for stale in [t for t in points if t <= oldest]:
                del points[stale]

    def gauges(self, now: float) -> dict[str, Any]:
        """Lag per topic, utilization, RSS and the count of the live processes at ``now``."""
        live = [
            s for s in self.states.values() if process_status(s, now) not in ("dead", "stopped")
        ]
        lag: dict[str, int] = {}
        newest: dict[tuple[str, str, int], tuple[float, int]] = {}
        for state in live:
            for part in state.get("partitions", ()):
                if part.get("lag") is None:
                    continue
                key = (
                    str(part.get("consumer_group")),
                    str(part["topic"]),
                    int(part.get("partition", 0)),
                )
                seen = newest.get(key)
                if seen is None or seen[0] < state["reported_at"]:
                    newest[key] = (state["reported_at"], int(part["lag"]))
        for (_, topic, _), (_, value) in newest.items():
            lag[topic] = lag.get(topic, 0) + value
        return {
            "lag": lag,
            "utilization": round(sum(s["utilization"] for s in live) / len(live), 4)
            if live
            else 0.0,
            "rss": sum(s["rss"] for s in live),
            "processes": len(live),
        }

    def forget(self, now: float) -> list[str]:
        """Drop processes silent for longer than ``forget_after``; returns their ids."""
        gone = [
            pid
            for pid, state in self.states.items()
            if now - float(state.get("reported_at") or 0.0) > self.forget_after
        ]
        for pid in gone:
            del self.states[pid]
            self.changed.add(pid)
        return gone

    # -- publishing -----------------------------------------------------------------------------

    def take_changes(self) -> dict[str, dict[str, Any] | None]:
        """The states changed since the last call (``None``: forget the process)."""
        changes = {pid: self.states.get(pid) for pid in self.changed}
        self.changed = set()
        return changes

    def series_document(self, name: str) -> dict[str, Any]:
        """One resolution's series as published on the metrics topic."""
        resolution = next(r for r in RESOLUTIONS if r.name == name)
        points = self.series[name]
        return {
            "resolution": name,
            "seconds": resolution.seconds,
            "points": [points[t] for t in sorted(points)],
        }


def _slowest(
    previous: Mapping[str, Any] | None, recent: Iterable[Mapping[str, Any]], now: float
) -> list[dict[str, Any]]:
    """The slowest batches of the last hour: the ones known, plus the report's."""
    jobs = [dict(j) for j in (previous or {}).get("slowest", ())] + [dict(j) for j in recent]
    kept = [j for j in jobs if now - float(j.get("finished_at") or 0.0) <= _SLOWEST_WINDOW]
    kept.sort(key=lambda j: -float(j.get("duration") or 0.0))
    return kept[:_SLOWEST_KEPT]


def rate(point: Mapping[str, Any], name: str, seconds: int, now: float) -> float:
    """``point[name]`` per second over its bucket (the part of it that has passed, for the
    newest bucket)."""
    passed = min(float(seconds), max(1.0, now - float(point["t"])))
    value = float(point.get(name) or 0)
    return 0.0 if math.isnan(value) else value / passed


def _job_queues(value: Any) -> dict[str, dict[str, int]]:
    """A report's job queue counters (``{topic: {done, retried, dead, done_interval}}``), the
    malformed parts left out."""
    if not isinstance(value, dict):
        return {}
    return {
        str(topic): {name: int(count) for name, count in counts.items() if isinstance(count, int)}
        for topic, counts in value.items()
        if isinstance(counts, dict)
    }
