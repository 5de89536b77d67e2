"""A process's report: what it publishes every ``tracking_interval``, and the check that the
aggregator runs on every report it reads (a malformed one is refused, never folded)."""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conveyor.serialization import json_loads

if TYPE_CHECKING:
    from conveyor.processing.snapshot import Snapshot

__all__ = [
    "SCHEMA",
    "MalformedReport",
    "ProcessSampler",
    "ProcessUsage",
    "build_report",
    "parse_report",
]

SCHEMA = 1
"""The report format's version; the aggregator refuses other versions."""

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class MalformedReport(ValueError):
    """A message on the reports topic that is not a report this version can fold."""


@dataclass(frozen=True)
class ProcessUsage:
    """What the operating system says of the process."""

    rss: int
    """Resident memory in bytes."""
    cpu: float
    """CPU used since the previous sample, as a share of one core (1.0 = one core busy)."""
    cpu_seconds: float
    threads: int
    """Threads of the process, librdkafka's included (Python's only where /proc is missing)."""


class ProcessSampler:
    """Reads RSS, CPU and threads of this process; CPU is the share used between two calls."""

    def __init__(self) -> None:
        self._last_wall = time.monotonic()
        self._last_cpu = _cpu_seconds()

    def sample(self) -> ProcessUsage:
        wall, cpu = time.monotonic(), _cpu_seconds()
        elapsed = wall - self._last_wall
        share = (cpu - self._last_cpu) / elapsed if elapsed > 0 else 0.0
        self._last_wall, self._last_cpu = wall, cpu
        return ProcessUsage(
            rss=_rss(), cpu=round(share, 4), cpu_seconds=round(cpu, 3), threads=_threads()
        )


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the peak, in KiB


def _threads() -> int:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return threading.active_count()


def build_report(
    *,
    process_id: str,
    client_id: str,
    seq: int,
    interval: float,
    snapshot: Snapshot,
    usage: ProcessUsage,
    counters: Mapping[str, float],
    slowest: list[dict[str, Any]],
) -> dict[str, Any]:
    """The JSON-ready report of one process at one moment.

    ``counters`` are totals since the process started (``processed``, ``batches``,
    ``errors``, ``busy_seconds``): the aggregator turns two reports into rates, so a lost
    or repeated report costs no accuracy.
    """
    state = snapshot.to_dict()
    return {
        "schema": SCHEMA,
        "id": process_id,
        "client_id": client_id,
        "seq": seq,
        "at": snapshot.taken_at,
        "interval": interval,
        "process": {
            **state["process"],
            "rss": usage.rss,
            "cpu": usage.cpu,
            "cpu_seconds": usage.cpu_seconds,
            "threads": usage.threads,
        },
        "counters": dict(counters),
        "pool": state["pool"],
        "listeners": state["listeners"],
        "partitions": state["partitions"],
        "jobs": state["jobs"],
        "slowest": slowest,
    }


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "client_id": str,
    "seq": int,
    "at": (int, float),
    "interval": (int, float),
    "process": dict,
    "counters": dict,
    "listeners": list,
    "partitions": list,
    "jobs": list,
}


def parse_report(raw: bytes | None) -> dict[str, Any]:
    """The report in ``raw``, checked.

    Raises:
        MalformedReport: not JSON, not an object, another schema, or a field missing or of
            the wrong type (named).
    """
    if not raw:
        raise MalformedReport("an empty message")
    try:
        report = json_loads(raw)
    except ValueError as exc:
        raise MalformedReport(f"not JSON ({exc})") from None
    if not isinstance(report, dict):
        raise MalformedReport(f"a JSON {type(report).__name__}, not an object")
    if type(report.get("schema")) is not int or report["schema"] != SCHEMA:
        raise MalformedReport(f"schema {report.get('schema')!r}, this version reads {SCHEMA}")
    for name, kind in _REQUIRED.items():
        value = report.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise MalformedReport(f"field {name!r} is missing or not {_kind_name(kind)}")
    if not report["id"] or report["interval"] <= 0:
        raise MalformedReport("an empty id or a non-positive interval")
    for name, value in report["counters"].items():
        if not _number(value):
            raise MalformedReport(f"counter {name!r} is not a number")
    for name in ("rss", "cpu", "threads", "pid", "started_at"):
        value = report["process"].get(name)
        if value is not None and not _number(value):
            raise MalformedReport(f"process field {name!r} is not a number")
    pool = report.get("pool")
    if pool is not None and (
        not isinstance(pool, dict) or not all(_number(v) for v in pool.values())
    ):
        raise MalformedReport("pool is not an object of numbers")
    for part in report["partitions"]:
        if not isinstance(part, dict) or not isinstance(part.get("topic"), str):
            raise MalformedReport("a partition entry without a topic")
        for name in ("partition", "lag", "committed", "marked", "high_watermark"):
            value = part.get(name)
            if value is not None and not _number(value):
                raise MalformedReport(f"partition field {name!r} is not a number")
    latency = report.get("latency")
    if latency is not None and not (
        isinstance(latency, dict)
        and all(
            isinstance(stages, dict)
            and all(
                isinstance(summary, dict) and all(_number(v) for v in summary.values())
                for summary in stages.values()
            )
            for stages in latency.values()
        )
    ):
        raise MalformedReport("latency is not an object of topics, stages and numbers")
    for name in ("jobs", "slowest", "listeners"):
        if not all(isinstance(item, dict) for item in report.get(name) or ()):
            raise MalformedReport(f"{name} holds something that is not an object")
    return report


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
