"""What the explorer's and the dead letter queues' pages show, as plain data (the templates
render it, ``/api/...`` returns it as JSON). Nothing here knows HTTP."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from conveyor.admin.replay import redrive_dead_letters, replay_dead_letters
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.jobs.dead import discard, discarded, read_dead_job, reviver
from conveyor.jobs.host import JobsHost
from conveyor.web.reading.dead_letters import (
    dead_letter_topics,
    group_dead_letters,
    parse_refs,
    read,
)
from conveyor.web.reading.explorer import Explorer
from conveyor.web.reading.explorer_query import Filters, Start
from conveyor.web.ui.views import NotFound, Page

if TYPE_CHECKING:
    from conveyor.admin import Admin
    from conveyor.jobs.queues import Queue
    from conveyor.routing.host import RoutedHost

__all__ = ["ExplorerViews", "Redrive", "Redrives"]

_log = logging.getLogger("conveyor.web")

DLQ_READ = 2_000
"""Dead letters a DLQ page reads (the newest, over all partitions)."""


@dataclass
class Redrive:
    """A redrive running in the background: its progress and, once over, its summary."""

    id: str
    topic: str
    what: str
    to: str | None
    total: int | None = None
    done: int = 0
    state: str = "running"
    counts: dict[str, int] = field(default_factory=dict)
    missing: list[tuple[int, int]] = field(default_factory=list)
    unroutable: list[tuple[int, int]] = field(default_factory=list)
    timed_out: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "topic": self.topic,
            "what": self.what,
            "to": self.to,
            "total": self.total,
            "done": self.done,
            "state": self.state,
            "counts": dict(self.counts),
            "moved": sum(self.counts.values()),
            "missing": [f"{p}:{o}" for p, o in self.missing],
            "unroutable": [f"{p}:{o}" for p, o in self.unroutable],
            "timed_out": [f"{p}:{o}" for p, o in self.timed_out],
            "error": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


class Redrives:
    """The redrives this UI started (the newest ``keep``), each on a thread of its own."""

    def __init__(self, keep: int = 50) -> None:
        self._jobs: OrderedDict[str, Redrive] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep

    def start(self, job: Redrive, run: Callable[[Redrive], None]) -> Redrive:
        """Run ``job`` on a thread of its own; while another redrive of the same DLQ runs,
        that one is returned instead (two at once would move the same dead letters twice)."""
        with self._lock:
            for other in self._jobs.values():
                if other.topic == job.topic and other.state == "running":
                    return other
            self._jobs[job.id] = job
            while len(self._jobs) > self._keep:
                self._jobs.popitem(last=False)

        def work() -> None:
            try:
                run(job)
                job.state = "done"
            except Exception as error:
                job.state = "failed"
                job.error = f"{type(error).__name__}: {error}"
            finally:
                job.ended_at = time.time()

        threading.Thread(
            target=work, name=f"conveyor-web-redrive-{job.id[:8]}", daemon=True
        ).start()
        return job

    def get(self, job_id: str) -> Redrive | None:
        with self._lock:
            return self._jobs.get(job_id)


class ExplorerViews:
    """The explorer's and the DLQs' pages of one app's web UI."""

    def __init__(self, app: RoutedHost, admin: Callable[[], Admin], explorer: Explorer) -> None:
        self.app = app
        self._admin = admin
        self.explorer = explorer
        self.redrives = Redrives()

    # -- explorer -----------------------------------------------------------------------------

    def index(self) -> Page:
        names = sorted(n for n in self._admin().list_topics() if not n.startswith("__"))
        return Page("Explorer", {"topics": names})

    def topic(
        self,
        name: str,
        partition: int,
        start: Start,
        filters: Filters,
        limit: int,
    ) -> Page:
        partitions = self._partitions(name)
        if not any(p["partition"] == partition for p in partitions):
            raise ConfigurationError(
                f"{name!r} has no partition {partition} (it has {len(partitions)})", "partition"
            )
        read_page = self.explorer.browse(name, partition, start, limit, filters)
        return Page(
            f"Explorer: {name}",
            {
                "topic": name,
                "partitions": partitions,
                "partition": partition,
                "start": {
                    "kind": start.kind,
                    "value": start.value,
                    "text": start.describe(),
                    "iso": datetime.fromtimestamp(start.value, UTC).isoformat()
                    if start.kind == "time"
                    else None,
                },
                "filters": filters.as_query(),
                "filtered": filters.active,
                "limit": limit,
                "low": read_page.low,
                "high": read_page.high,
                "first": read_page.first,
                "scanned": read_page.scanned,
                "next_offset": read_page.next_offset,
                "timed_out": read_page.timed_out,
                "messages": read_page.messages,
                "scan_limit": self.explorer.scan_limit,
            },
        )

    def _partitions(self, name: str) -> list[dict[str, int]]:
        try:
            return self.explorer.partitions(name)
        except ConfigurationError:
            raise NotFound("topic", name) from None

    def message(self, name: str, partition: int, offset: int) -> Page:
        self._partitions(name)
        found = self.explorer.message(name, partition, offset)
        if found is None:
            raise NotFound("message", f"{name}/{partition}@{offset}")
        return Page(f"Message {name}/{partition}@{offset}", {"message": found, "topic": name})

    # -- dead letter queues -------------------------------------------------------------------

    def _declared(self) -> dict[str, list[str]]:
        declared: dict[str, list[str]] = {}
        for route in self.app.routes:
            dlq = route.dead_letter_queue
            if dlq is not None and dlq.topic:
                declared.setdefault(dlq.topic, []).append(route.name)
        for queue in self._job_queues().values():  # dead jobs: a DLQ of their queue
            declared.setdefault(queue.dead_topic, []).append(queue.topic)
        return declared

    def _job_queues(self) -> dict[str, Queue]:
        """The app's job queues by dead-job topic."""
        if not isinstance(self.app, JobsHost):
            return {}
        return {queue.dead_topic: queue for queue in self.app.jobs.queues.values()}

    def dlq_topics(self) -> list[dict[str, Any]]:
        return dead_letter_topics(self._declared(), self._admin().list_topics())

    def dlqs(self) -> Page:
        """Every DLQ with its message count; a count Kafka did not give in time is shown
        unknown, with why, and the rest of the list still stands."""
        rows = []
        for entry in self.dlq_topics():
            messages, unread = None, None
            if entry["exists"]:
                try:
                    messages = sum(p["messages"] for p in self.explorer.partitions(entry["name"]))
                except ConveyorError as exc:  # a timeout, the topic just deleted, Kafka away
                    _log.warning("the DLQ page could not count %s: %s", entry["name"], exc)
                    unread = str(exc)
            rows.append({**entry, "messages": messages, "unread": unread})
        return Page("Dead letter queues", {"dlqs": rows})

    def dlq(self, name: str) -> Page:
        known = {entry["name"]: entry for entry in self.dlq_topics()}
        entry = known.get(name)
        if entry is None or not entry["exists"]:
            raise NotFound("dead letter queue", name)
        partitions = self.explorer.partitions(name)
        total = sum(p["messages"] for p in partitions)
        per_partition = max(1, DLQ_READ // max(1, len(partitions)))
        raws, complete = self.explorer.scan(name, Start("newest", per_partition), DLQ_READ)
        queue = self._job_queues().get(name)
        gone = discarded(self.app.settings.kafka, queue) if queue is not None else set()
        raws = [raw for raw in raws if (raw.partition(), raw.offset()) not in gone]
        letters = [read(raw) for raw in raws]
        jobs = (  # a dead-job topic: each dead job's name and arguments too
            {(d.partition, d.offset): d for d in map(read_dead_job, raws)}
            if queue is not None
            else {}
        )
        letters.sort(key=lambda letter: (letter.timestamp or 0, letter.partition, letter.offset))
        groups = group_dead_letters(letters)
        return Page(
            f"Dead letter queue {name}",
            {
                "topic": name,
                "entry": entry,
                "total": total - len(gone),
                "shown": len(letters),
                "discardable": queue is not None,
                "discarded": len(gone),
                "queue": queue.topic if queue is not None else None,
                "complete": complete and len(letters) >= total,
                "groups": [group.to_dict() for group in groups],
                "letters": [
                    {
                        "ref": letter.ref,
                        "partition": letter.partition,
                        "offset": letter.offset,
                        "timestamp": letter.timestamp,
                        "original_topic": letter.original_topic,
                        "original_partition": letter.original_partition,
                        "original_offset": letter.original_offset,
                        "error_class": letter.error_class,
                        "error_message": letter.error_message,
                        "attempts": letter.attempts,
                        "key": letter.key,
                        "validation_errors": list(letter.validation_errors),
                        "job": _job_call(jobs.get((letter.partition, letter.offset))),
                    }
                    for letter in reversed(letters)  # newest first
                ],
            },
        )

    def redrive(self, name: str, refs: list[str], everything: bool, to: str | None) -> Redrive:
        """Start moving dead letters back: ``refs`` (partition:offset) or, with
        ``everything``, all that ``conveyor dlq replay`` has not moved yet."""
        if name not in {entry["name"] for entry in self.dlq_topics() if entry["exists"]}:
            raise NotFound("dead letter queue", name)
        target = to or None
        queue = self._job_queues().get(name)
        restore = None
        if queue is not None:  # dead jobs go back to their queue, their attempts from 1
            target = target or queue.topic
            restore = reviver(discarded(self.app.settings.kafka, queue))  # not the discarded
        if target is not None and target not in set(self._admin().list_topics()):
            raise ConfigurationError(f"topic {target!r} does not exist", "to")
        selection = [] if everything else parse_refs(refs)
        if not everything and not selection:
            raise ConfigurationError("select at least one dead letter (or redrive all)", "refs")
        what = "all not yet replayed" if everything else f"{len(selection)} selected"
        job = Redrive(uuid.uuid4().hex, name, what, target)

        def progress(done: int, total: int) -> None:
            job.done, job.total = done, total

        def run(job: Redrive) -> None:
            if everything:
                replay_dead_letters(
                    self.app,
                    name,
                    to=target,
                    on_progress=progress,
                    counts=job.counts,
                    restore=restore,
                )
                job.done = sum(job.counts.values())
            else:
                job.total = len(selection)
                result = redrive_dead_letters(
                    self.app,
                    name,
                    selection,
                    to=target,
                    on_progress=progress,
                    counts=job.counts,
                    restore=restore,
                )
                job.missing, job.unroutable = result["missing"], result["unroutable"]
                job.timed_out = result["timed_out"]

        return self.redrives.start(job, run)

    def discard(self, name: str, refs: list[str]) -> int:
        """Discard the dead jobs at ``refs`` of the dead-job topic ``name``: no longer listed,
        never sent back. Returns how many were noted."""
        queue = self._job_queues().get(name)
        if queue is None:
            raise NotFound("dead-job topic", name)
        selection = parse_refs(refs)
        if not selection:
            raise ConfigurationError("select at least one dead job to discard", "refs")
        return discard(self.app.producer, queue, selection)

    def redrive_page(self, name: str, job_id: str) -> Page:
        job = self.redrives.get(job_id)
        if job is None or job.topic != name:
            raise NotFound("redrive", job_id)
        return Page(f"Redrive from {name}", {"redrive": job.to_dict()})


def _job_call(dead: Any) -> str | None:
    """A dead job as a call (``bill(7, rush=true)``), or ``None`` for another dead letter."""
    if dead is None:
        return None
    arguments = [json_text(a) for a in dead.args] + [
        f"{k}={json_text(v)}" for k, v in dead.kwargs.items()
    ]
    call = f"{dead.job}({', '.join(arguments)})"
    return call if len(call) <= 300 else call[:299] + "…"


def json_text(value: Any) -> str:
    """``value`` as JSON text (for a dead job's arguments)."""
    return json.dumps(value, ensure_ascii=False, default=str)
