"""What each page shows, as plain data: the HTML templates render it and ``/api/...`` returns
it as JSON, so the two never disagree. Nothing here knows HTTP."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conveyor.admin import Admin
from conveyor.asyncapi import asyncapi_document, to_yaml
from conveyor.errors import ConveyorError, KafkaError
from conveyor.jobs.host import JobsHost
from conveyor.masking import mask, shown_setting
from conveyor.settings import producer_settings
from conveyor.tracing import STAGES
from conveyor.web.aggregation.fold import DEAD_AFTER_INTERVALS, RESOLUTIONS, process_status, rate
from conveyor.web.commands import consumer_groups, fleet_members
from conveyor.web.reading.data import WebData
from conveyor.web.ui.status import status_checks

if TYPE_CHECKING:
    from conveyor.web.ui.host import UiHost

__all__ = ["PER_PAGE", "RANGES", "NotFound", "Views"]

_log = logging.getLogger("conveyor.web")

PER_PAGE = 50
RANGES = {"1h": ("minute", 3600), "24h": ("ten_minutes", 86400), "7d": ("hour", 7 * 86400)}
"""Dashboard ranges: the series each one reads and its span in seconds."""


def swarm_label(state: dict[str, Any]) -> str | None:
    """``supervisor 4211 · node 02`` for a swarm node's state, ``None`` outside a swarm."""
    node, supervisor = state.get("swarm_node"), state.get("swarm_supervisor")
    if node is None or supervisor is None:
        return None
    return f"supervisor {supervisor} · node {int(node):02d}"


class NotFound(LookupError):
    """An unknown process, topic, error or broker in a URL."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"no {kind} {name!r}")
        self.kind = kind
        self.name = name


def _unread_topic(name: str, web: bool, why: BaseException) -> dict[str, Any]:
    """A topics-page row whose counts Kafka did not give (a timeout, a refusal): shown unknown,
    with why."""
    return {
        "name": name,
        "partitions": None,
        "replication_factor": None,
        "messages": None,
        "messages_per_second": None,
        "web": web,
        "unread": str(why),
    }


@dataclass
class Page:
    """One page's data: its title and everything the template shows."""

    title: str
    data: dict[str, Any] = field(default_factory=dict)


def paginate(
    rows: Sequence[Any], page: int, per_page: int = PER_PAGE
) -> tuple[list[Any], dict[str, int]]:
    pages = max(1, -(-len(rows) // per_page))
    page = min(max(1, page), pages)
    start = (page - 1) * per_page
    return list(rows[start : start + per_page]), {"page": page, "pages": pages, "total": len(rows)}


class Views:
    """The pages of one app's web UI."""

    def __init__(self, web: UiHost, data: WebData, clock: Callable[[], float] = time.time) -> None:
        self.web = web
        self.app = web.app
        self.data = data
        self.clock = clock
        self._admin: Admin | None = None
        self._lock = threading.Lock()
        self._watermarks: dict[str, tuple[float, int]] = {}

    @property
    def admin(self) -> Admin:
        with self._lock:
            if self._admin is None:
                self._admin = Admin(producer_settings(self.app.settings.kafka), timeout=10)
            return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()

    # -- processes ----------------------------------------------------------------------------

    def _processes(self) -> list[dict[str, Any]]:
        now = self.clock()
        rows = []
        for state in self.data.states().values():
            status = process_status(state, now)
            started = state.get("started_at")
            rows.append(
                {
                    "id": state["id"],
                    "client_id": state.get("client_id"),
                    "hostname": state.get("hostname"),
                    "pid": state.get("pid"),
                    "swarm": swarm_label(state),
                    "status": status,
                    "uptime": now - started
                    if started and status not in ("dead", "stopped")
                    else None,
                    "reported_at": state.get("reported_at"),
                    "listeners": len(state.get("listeners", ())),
                    "partitions": len(state.get("partitions", ())),
                    "threads": state.get("threads"),
                    "utilization": state.get("utilization", 0.0),
                    "cpu": state.get("cpu", 0.0),
                    "rss": state.get("rss", 0),
                    "lag": state.get("lag", 0),
                    "messages_per_second": state.get("messages_per_second", 0.0),
                }
            )
        # a swarm's nodes together, in node order, under their supervisor
        rows.sort(
            key=lambda r: (
                r["status"] in ("dead", "stopped"),
                str(r["hostname"]),
                r["swarm"] or "",
                str(r["id"]),
            )
        )
        return rows

    def _live(self) -> list[dict[str, Any]]:
        now = self.clock()
        return [
            s
            for s in self.data.states().values()
            if process_status(s, now) not in ("dead", "stopped")
        ]

    def dashboard(self, range_: str = "1h") -> Page:
        if range_ not in RANGES:
            range_ = "1h"
        now = self.clock()
        processes = self._processes()
        live = self._live()
        errors = self.data.errors()
        resolution, span = RANGES[range_]
        seconds = next(r.seconds for r in RESOLUTIONS if r.name == resolution)
        document = self.data.series(resolution) or {"points": []}
        points = [p for p in document.get("points", ()) if p.get("t", 0) >= now - span]
        charts = {
            "throughput": [(p["t"], rate(p, "messages", seconds, now)) for p in points],
            "lag": [(p["t"], float(sum((p.get("lag") or {}).values()))) for p in points],
            "utilization": [(p["t"], 100.0 * float(p.get("utilization") or 0.0)) for p in points],
            "rss": [(p["t"], float(p.get("rss") or 0) / 2**20) for p in points],
            "errors": [(p["t"], rate(p, "errors", seconds, now)) for p in points],
        }
        counts = {
            "processes": len(live),
            "dead": sum(1 for p in processes if p["status"] == "dead"),
            "partitions": sum(len(s.get("partitions", ())) for s in live),
            "jobs": sum(len(s.get("jobs", ())) for s in live),
            "errors_last_hour": sum(1 for e in errors if float(e.get("at") or 0) >= now - 3600),
            "messages_per_second": round(
                sum(float(s.get("messages_per_second") or 0) for s in live), 2
            ),
            "lag": sum(int(s.get("lag") or 0) for s in live),
        }
        return Page(
            "Dashboard",
            {
                "range": range_,
                "ranges": list(RANGES),
                "counts": counts,
                "charts": charts,
                "resolution": resolution,
                "bucket_seconds": seconds,
            },
        )

    def processes(self, page: int = 1) -> Page:
        rows, paging = paginate(self._processes(), page)
        return Page(
            "Processes",
            {
                "processes": rows,
                "paging": paging,
                "fleet": self._fleet(),
                "dead_after": DEAD_AFTER_INTERVALS,
            },
        )

    def _fleet(self) -> dict[str, Any]:
        """What quiet and stop to every process would reach: the processes the reports show
        running, in all and per consumer group."""
        states, now = self.data.states(), self.clock()
        every = fleet_members(states, now)
        groups = sorted({group for process in every for group in consumer_groups(states[process])})
        return {
            "processes": len(every),
            "groups": [
                {"group": group, "processes": len(fleet_members(states, now, group))}
                for group in groups
            ],
        }

    def process(self, process_id: str) -> Page:
        state = self.data.states().get(process_id)
        if state is None:
            raise NotFound("process", process_id)
        now = self.clock()
        summary = next(p for p in self._processes() if p["id"] == process_id)
        jobs = [
            {**job, "running_for": now - float(job.get("started_at") or now)}
            for job in state.get("jobs", ())
        ]
        latency = [
            {"topic": topic, "stage": stage, **stages[stage]}
            for topic, stages in sorted((state.get("latency") or {}).items())
            for stage in STAGES
            if stage in stages
        ]
        return Page(
            f"Process {process_id}",
            {
                "process": summary,
                "listeners": state.get("listeners", []),
                "partitions": state.get("partitions", []),
                "jobs": jobs,
                "pool": state.get("pool") or {},
                "counters": state.get("counters", {}),
                "latency": latency,
            },
        )

    def batches(self) -> Page:
        """The engine's batches (Karafka's jobs): running now, and the slowest of the last hour."""
        slowest = []
        for state in self.data.states().values():
            slowest += [{**job, "process": state["id"]} for job in state.get("slowest", ())]
        slowest.sort(key=lambda j: -float(j.get("duration") or 0))
        return Page("Batches", {"running": self._running(), "slowest": slowest[:20]})

    def background_jobs(self) -> Page:
        """The background job queues (``@app.job``)."""
        return Page("Background jobs", {"queues": self._job_queues(self._running())})

    def _running(self) -> list[dict[str, Any]]:
        """The batches the live processes ran at their last reports, the longest first."""
        now = self.clock()
        running = []
        for state in self._live():
            consumers = {
                (p["topic"], p["partition"]): p.get("consumer") for p in state.get("partitions", ())
            }
            for job in state.get("jobs", ()):
                running.append(
                    {
                        **job,
                        "process": state["id"],
                        "consumer": consumers.get((job["topic"], job["partition"])),
                        "running_for": now - float(job.get("started_at") or now),
                    }
                )
        running.sort(key=lambda j: -j["running_for"])
        return running

    def _job_queues(self, running: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The background job queues: waiting (the group's lag), running (batches at the last
        reports), done / retried / dead (since the processes started), done/s (the last
        reports), dead (what the dead-job topic holds)."""
        queues = list(self.app.jobs.queues.values()) if isinstance(self.app, JobsHost) else []
        if not queues:
            return []
        group = str(self.app.settings.kafka.get("group.id") or self.app.settings.client_id)
        waiting: dict[str, int] = {}
        try:
            for lag in self.admin.read_lags([group]):
                waiting[lag.topic] = waiting.get(lag.topic, 0) + lag.lag
        except ConveyorError:
            waiting = {}
        live = self._live()
        rows = []
        for queue in queues:
            counts = {"done": 0, "retried": 0, "dead": 0, "done_interval": 0}
            rate = 0.0
            for state in live:
                mine = state.get("job_queues", {}).get(queue.topic, {})
                for name in counts:
                    counts[name] += int(mine.get(name, 0))
                rate += int(mine.get("done_interval", 0)) / float(state.get("interval") or 1)
            rows.append(
                {
                    "queue": queue.name,
                    "topic": queue.topic,
                    "dead_topic": queue.dead_topic,
                    "jobs": sorted(queue.by_name),
                    "waiting": waiting.get(queue.topic),
                    "running": sum(1 for job in running if job["topic"] == queue.topic),
                    "done": counts["done"],
                    "done_per_second": rate,
                    "retried": counts["retried"],
                    "died": counts["dead"],
                    "failed": counts["retried"] + counts["dead"],
                    "dead": self._stored(queue.dead_topic),
                }
            )
        return rows

    def _stored(self, topic: str) -> int | None:
        """Messages ``topic`` holds (``None`` when it cannot be read)."""
        try:
            return self.admin.message_count(topic)
        except ConveyorError:
            return None

    # -- routing and lags -----------------------------------------------------------------------

    def routing(self) -> Page:
        groups: dict[str, list[dict[str, Any]]] = {}
        settings = self.app.settings
        for route in self.app.routes:
            dlq = route.dead_letter_queue
            groups.setdefault(route.consumer_group, []).append(
                {
                    "subscription_group": route.subscription_group,
                    "topic": route.name,
                    "consumer": route.consumer_class.__name__ if route.consumer_class else None,
                    "active": route.active,
                    "dead_letter_queue": (dlq.topic or "skip") if dlq is not None else None,
                    "max_retries": dlq.max_retries if dlq is not None else None,
                    "deserializers": route.deserializers.names(),
                    "max_messages": route.max_messages or settings.max_messages,
                    "max_wait_time": route.max_wait_time or settings.max_wait_time,
                    "initial_offset": route.initial_offset
                    or str(settings.kafka.get("auto.offset.reset", "earliest")),
                    "assign": list(route.assign) if route.assign else None,
                    "manual_offset_management": route.manual_offset_management,
                    "long_running_job": route.long_running_job,
                    "virtual_partitions": (vp.max_partitions or settings.concurrency)
                    if (vp := route.virtual_partitions)
                    else None,
                    "declared": {
                        "partitions": route.partitions,
                        "replication_factor": route.replication_factor,
                        "config": dict(route.config),
                    },
                    "kafka": {k: shown_setting(v) for k, v in sorted(mask(route.kafka).items())},
                }
            )
        kafka = {k: shown_setting(v) for k, v in sorted(mask(settings.kafka).items())}
        return Page(
            "Routing",
            {
                "client_id": settings.client_id,
                "groups": groups,
                "kafka": kafka,
                "bootstrap": settings.kafka.get("bootstrap.servers"),
            },
        )

    def asyncapi(self) -> Page:
        """The app's AsyncAPI 3.0 document: its channels and operations as tables, the
        document as YAML (and as JSON at ``/api/asyncapi``)."""
        document = asyncapi_document(self.app)
        channels = [
            {
                "id": key,
                "address": channel["address"],
                "description": channel.get("description"),
                "messages": sorted(channel["messages"]),
            }
            for key, channel in document["channels"].items()
        ]
        operations = [
            {
                "id": key,
                "action": operation["action"],
                "channel": operation["channel"]["$ref"].rsplit("/", 1)[-1],
                "summary": operation.get("summary", ""),
                "reply": operation["reply"]["channel"]["$ref"].rsplit("/", 1)[-1]
                if "reply" in operation
                else None,
            }
            for key, operation in document["operations"].items()
        ]
        return Page(
            "AsyncAPI",
            {
                "document": document,
                "yaml": to_yaml(document),
                "channels": channels,
                "operations": operations,
            },
        )

    def lags(self) -> Page:
        groups = sorted({r.consumer_group for r in self.app.routes.active() if not r.direct})
        rows: list[dict[str, Any]] = []
        problem = None
        try:
            known = set(self.admin.list_consumer_groups())
            lags = self.admin.read_lags([g for g in groups if g in known])
            ages = self.admin.read_time_lags(lags)
            rows = [
                {
                    "group": lag.group,
                    "topic": lag.topic,
                    "partition": lag.partition,
                    "committed": lag.committed,
                    "high_watermark": lag.high_watermark,
                    "lag": lag.lag,
                    "age": ages.get((lag.group, lag.topic, lag.partition)),
                    "metadata": lag.metadata,
                }
                for lag in lags
            ]
            missing = [g for g in groups if g not in known]
            if missing:
                problem = f"no committed offsets yet for {', '.join(missing)}"
        except ConveyorError as exc:
            problem = f"could not read lags from Kafka: {exc}"
        totals: dict[tuple[str, str], dict[str, Any]] = {}
        for row in rows:
            total = totals.setdefault(
                (row["group"], row["topic"]),
                {"group": row["group"], "topic": row["topic"], "lag": 0, "age": None},
            )
            total["lag"] += row["lag"]
            if row["age"] is not None:
                total["age"] = max(total["age"] or 0.0, row["age"])
        document = self.data.series("minute") or {"points": []}
        topics = sorted({t for p in document.get("points", ()) for t in (p.get("lag") or {})})
        charts = {
            topic: [
                (p["t"], float((p.get("lag") or {}).get(topic, 0)))
                for p in document.get("points", ())
            ]
            for topic in topics
        }
        return Page(
            "Lags",
            {
                "groups": groups,
                "partitions": rows,
                "topics": list(totals.values()),
                "charts": charts,
                "problem": problem,
            },
        )

    # -- errors ---------------------------------------------------------------------------------

    def errors(self, filters: Mapping[str, str], page: int = 1) -> Page:
        everything = self.data.errors()
        chosen = everything
        for name in ("type", "topic", "process"):
            wanted = filters.get(name)
            if wanted:
                chosen = [e for e in chosen if str(e.get(name)) == wanted]
        text = (filters.get("q") or "").lower()
        if text:
            chosen = [
                e for e in chosen if text in f"{e.get('error_class')} {e.get('message')}".lower()
            ]
        rows, paging = paginate(chosen, page)
        options = {
            name: sorted({str(e.get(name)) for e in everything if e.get(name) is not None})
            for name in ("type", "topic", "process")
        }
        return Page(
            "Errors",
            {
                "errors": [_brief(e) for e in rows],
                "paging": paging,
                "filters": dict(filters),
                "options": options,
            },
        )

    def error(self, error_id: str) -> Page:
        found = self.data.find_error(error_id)
        if found is None:
            raise NotFound("error", error_id)
        return Page(f"Error {error_id}", {"error": found})

    # -- topics and cluster ---------------------------------------------------------------------

    def topics(self, page: int = 1, internal: bool = False) -> Page:
        names = self.admin.list_topics(internal=internal)
        chosen, paging = paginate(sorted(names), page)
        now = self.clock()
        rows = []
        for name in chosen:
            try:
                info = self.admin.topic_info(name)
                total = ends = 0
                for partition in info.partitions:
                    low, high = self.admin.read_watermark_offsets(name, partition.partition)
                    total += max(0, high - low)
                    ends += high
            except ConveyorError as exc:  # one topic unread: the rest of the list stands
                if isinstance(exc, KafkaError) and exc.name == "UNKNOWN_TOPIC_OR_PART":
                    continue  # deleted since it was listed
                _log.warning("the topics page could not read %s: %s", name, exc)
                rows.append(_unread_topic(name, name in self.web.topics.names, exc))
                continue
            seen = self._watermarks.get(name)
            per_second = (ends - seen[1]) / (now - seen[0]) if seen and now - seen[0] >= 1 else None
            if seen is None or now - seen[0] >= 1:
                self._watermarks[name] = (now, ends)
            rows.append(
                {
                    "name": name,
                    "partitions": info.partition_count,
                    "replication_factor": len(info.partitions[0].replicas)
                    if info.partitions
                    else 0,
                    "messages": total,
                    "messages_per_second": round(per_second, 2) if per_second is not None else None,
                    "web": name in self.web.topics.names,
                    "unread": None,
                }
            )
        return Page("Topics", {"topics": rows, "paging": paging, "internal": internal})

    def topic(self, name: str) -> Page:
        if name not in self.admin.list_topics(internal=True):
            raise NotFound("topic", name)
        info = self.admin.topic_info(name)
        configs = [
            {
                "name": c.name,
                "value": "********" if c.sensitive else c.value,
                "default": c.default,
                "sensitive": c.sensitive,
                "read_only": c.read_only,
                "source": c.source,
            }
            for c in sorted(
                self.admin.describe_configs("topic", name).values(),
                key=lambda c: (c.default, c.name),
            )
        ]
        loads = {load.partition: load for load in self.admin.partition_distribution(name)}
        partitions = []
        for p in info.partitions:
            low, high = self.admin.read_watermark_offsets(name, p.partition)
            load = loads.get(p.partition)
            partitions.append(
                {
                    "partition": p.partition,
                    "leader": p.leader,
                    "replicas": list(p.replicas),
                    "isr": list(p.in_sync_replicas),
                    "low": low,
                    "high": high,
                    "messages": load.messages if load else 0,
                    "share": load.share if load else 0.0,
                    "from_mean": load.from_mean if load else 0.0,
                    "under_replicated": len(p.in_sync_replicas) < len(p.replicas),
                }
            )
        skew = max((load.from_mean for load in loads.values()), key=abs, default=0.0)
        bars = [(str(load.partition), float(load.messages)) for load in loads.values()]
        return Page(
            f"Topic {name}",
            {
                "name": name,
                "partitions": partitions,
                "configs": configs,
                "skew": skew,
                "bars": bars,
            },
        )

    def cluster(self, broker: int | None = None, everything: bool = False) -> Page:
        info = self.admin.cluster_info()
        ids = [b.id for b in info.brokers]
        chosen = broker if broker is not None else (ids[0] if ids else None)
        if broker is not None and broker not in ids:
            raise NotFound("broker", str(broker))
        configs = []
        if chosen is not None:
            configs = [
                {
                    "name": c.name,
                    "value": "********" if c.sensitive else c.value,
                    "default": c.default,
                    "sensitive": c.sensitive,
                    "read_only": c.read_only,
                    "source": c.source,
                }
                for c in sorted(
                    self.admin.describe_configs("broker", str(chosen)).values(),
                    key=lambda c: c.name,
                )
                if everything or not c.default
            ]
        return Page(
            "Cluster",
            {
                "cluster_id": info.cluster_id,
                "controller": info.controller_id,
                "brokers": [
                    {"id": b.id, "address": b.address, "controller": b.id == info.controller_id}
                    for b in info.brokers
                ],
                "broker": chosen,
                "configs": configs,
                "all": everything,
            },
        )

    # -- status ---------------------------------------------------------------------------------

    def status(self) -> Page:
        checks = status_checks(self.web, self.data, lambda: self.admin, self.clock())
        return Page("Status", {"checks": checks, "ok": all(c["ok"] for c in checks)})


def _brief(error: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: error.get(key)
        for key in (
            "id",
            "at",
            "type",
            "error_class",
            "message",
            "topic",
            "partition",
            "offset",
            "consumer",
            "process",
        )
    }
