"""Reporting: a listener of the app's monitor that publishes the process's report every
``tracking_interval`` and every error it sees, with the app's own producer.

The consumer path pays one counter update per finished batch (not per message); the report
itself is built on the tracker's own thread from ``app.snapshot()``.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import secrets
import socket
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from conveyor.instrumentation import events as ev
from conveyor.instrumentation.monitor import Event
from conveyor.serialization import json_dumps
from conveyor.web.reports import ProcessSampler, build_report
from conveyor.web.topics import LABEL, WebTopics

if TYPE_CHECKING:
    from conveyor.host import Host
    from conveyor.tracing.latency import Latency

__all__ = ["Tracker", "process_id"]

_log = logging.getLogger("conveyor.web")


_SLOWEST = 10
_MAX_ERRORS_PER_INTERVAL = 200
_RECHECK = 60.0


def process_id() -> str:
    """``host:pid:random``: unique even when a pid is reused on the same host."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"


class Tracker:
    """Publishes this process's reports and errors while the app runs.

    Started by ``app.running`` and stopped, with a last report saying ``stopped``, after the
    app's consumers stopped and before its producer closes.
    """

    def __init__(
        self, app: Host, topics: WebTopics, interval: float, latency: Latency | None = None
    ) -> None:
        self.app = app
        self.latency = latency
        self.topics = topics
        self.interval = interval
        self.id = process_id()
        self._lock = threading.Lock()
        self._processed = 0
        self._batches = 0
        self._busy = 0.0
        self._errors = 0
        self._errors_sent_this_interval = 0
        self._slowest: list[tuple[float, int, dict[str, Any]]] = []
        # per job queue topic: jobs done, retried, dead (since the process started), and done
        # since the last report (the Background jobs page's done/s)
        self._job_counts: dict[str, dict[str, int]] = {}
        self._sequence = 0
        self._seq = 0
        self._sampler = ProcessSampler()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: list[Any] = []
        self.reports_sent = 0
        self.report_bytes = 0
        self.installed = False
        """Whether the reports and errors topics exist (checked when reporting starts)."""
        self._checked = False
        # errors seen before the first check said whether the topics exist (a consumer can fail
        # before the tracker's first list of topics returns): published once it says they do
        self._early: list[dict[str, Any]] = []
        self._warned = False

    # -- monitor listeners ----------------------------------------------------------------------

    def attach(self) -> None:
        monitor = self.app.monitor
        self._unsubscribe = [
            monitor.subscribe(ev.CONSUMER_CONSUMED, self._consumed),
            monitor.subscribe(ev.ERROR_OCCURRED, self._error),
            monitor.subscribe(ev.APP_RUNNING, lambda _event: self.start()),
            monitor.subscribe(ev.JOB_PERFORMED, lambda event: self._job(event, "done")),
            monitor.subscribe(ev.JOB_RETRIED, lambda event: self._job(event, "retried")),
            monitor.subscribe(ev.JOB_DIED, lambda event: self._job(event, "dead")),
        ]

    def detach(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _consumed(self, event: Event) -> None:
        count, duration = event["count"], event["duration"]
        with self._lock:
            self._processed += count
            self._batches += 1
            self._busy += duration
            slowest = self._slowest
            if len(slowest) < _SLOWEST or duration > slowest[0][0]:
                self._sequence += 1
                job = {
                    "consumer": type(event["consumer"]).__name__,
                    "topic": event["topic"],
                    "partition": event["partition"],
                    "first_offset": event["first_offset"],
                    "last_offset": event["last_offset"],
                    "count": count,
                    "duration": duration,
                    "finished_at": time.time(),
                }
                entry = (duration, self._sequence, job)
                if len(slowest) < _SLOWEST:
                    heapq.heappush(slowest, entry)
                else:
                    heapq.heapreplace(slowest, entry)

    def _job(self, event: Event, outcome: str) -> None:
        with self._lock:
            counts = self._job_counts.setdefault(
                event["topic"], {"done": 0, "retried": 0, "dead": 0, "done_interval": 0}
            )
            counts[outcome] += 1
            if outcome == "done":
                counts["done_interval"] += 1

    def _error(self, event: Event) -> None:
        if event.get("label") == LABEL or event.get("topic") in self.topics.names:
            return  # the web UI's own messages failed: logged, never fed back into the topic
        with self._lock:
            if not self.installed:
                if not self._checked and len(self._early) < _MAX_ERRORS_PER_INTERVAL:
                    self._early.append(error_record(event, self.id, self.app.settings.client_id))
                return
            self._errors += 1
            if self._errors_sent_this_interval >= _MAX_ERRORS_PER_INTERVAL:
                return
            self._errors_sent_this_interval += 1
        self._publish(error_record(event, self.id, self.app.settings.client_id))

    def _publish(self, record: dict[str, Any]) -> None:
        try:
            self.app.producer.produce_async(
                topic=self.topics.errors, key=self.id, payload=json_dumps(record), label=LABEL
            )
        except Exception as exc:
            _log.warning("could not publish an error to %s: %s", self.topics.errors, exc)

    # -- the reporting thread -------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="conveyor-web-tracker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        checked_at = -math.inf
        while not self._stopped.is_set():
            if not self.installed and time.monotonic() - checked_at >= _RECHECK:
                checked_at = time.monotonic()
                self._check_topics()
            if self.installed:
                self.report()
            self._wake.wait(self.interval)
            self._wake.clear()

    def _check_topics(self) -> None:
        """Reports to a missing topic would fail every interval: say so once, look again
        every minute."""
        try:
            existing = set(self.app.admin.list_topics())
        except Exception as exc:
            _log.warning("the web UI's reporting cannot list topics (%s); reporting anyway", exc)
            missing = []
        else:
            missing = [
                name for name in (self.topics.reports, self.topics.errors) if name not in existing
            ]
        with self._lock:
            self.installed = not missing
            self._checked = True
            early, self._early = self._early, []
            if self.installed:
                self._errors += len(early)
                self._errors_sent_this_interval += len(early)
        for record in early if self.installed else []:
            self._publish(record)
        if missing and not self._warned:
            self._warned = True
            _log.warning(
                "web UI reporting is on, but %s missing: run `conveyor web install --app ...`; "
                "this process reports once it exists",
                " and ".join(missing) + (" is" if len(missing) == 1 else " are"),
            )

    def stop(self) -> None:
        """Stop the thread and send the last report (the app's consumers have stopped)."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
        if self.installed:
            self.report(state="stopped")
        self.detach()

    def report(self, state: str | None = None) -> dict[str, Any] | None:
        """Build and publish one report now; returns it (``None`` if it could not be sent)."""
        snapshot = self.app.snapshot()
        with self._lock:
            counters = {
                "processed": self._processed,
                "batches": self._batches,
                "busy_seconds": round(self._busy, 6),
                "errors": self._errors,
            }
            slowest = [job for _, _, job in sorted(self._slowest, reverse=True)]
            self._slowest = []
            job_queues = {topic: dict(counts) for topic, counts in self._job_counts.items()}
            for counts in self._job_counts.values():
                counts["done_interval"] = 0
            self._errors_sent_this_interval = 0
            self._seq += 1
            seq = self._seq
        report = build_report(
            process_id=self.id,
            client_id=self.app.settings.client_id,
            seq=seq,
            interval=self.interval,
            snapshot=snapshot,
            usage=self._sampler.sample(),
            counters=counters,
            slowest=slowest,
        )
        if state is not None:
            report["process"]["state"] = state
        if job_queues:
            report["job_queues"] = job_queues
        stores = self.app.stores.reports()
        if stores:  # the Stores page's
            report["stores"] = stores
        latency = self.latency
        if latency is not None and latency.active:  # per-stage latency, when the app measures it
            report["latency"] = {
                topic: {stage: summary.to_dict() for stage, summary in stages.items()}
                for topic, stages in latency.snapshot().items()
            }
        payload = json_dumps(report)
        try:
            self.app.producer.produce_async(
                topic=self.topics.reports, key=self.id, payload=payload, label=LABEL
            )
        except Exception as exc:
            _log.warning("could not publish a report to %s: %s", self.topics.reports, exc)
            return None
        self.reports_sent += 1
        self.report_bytes += len(payload)
        return report


def error_record(event: Event, process: str, client_id: str) -> dict[str, Any]:
    """What ``conveyor_errors`` keeps of one ``error.occurred`` event."""
    error = event.get("error")
    consumer = event.get("consumer")
    offset = event.get("offset", event.get("first_offset"))
    return {
        "type": event.get("type", "error"),
        "error_class": type(error).__name__ if error is not None else None,
        "message": str(error) if error is not None else "",
        "traceback": "".join(traceback.format_exception(error))
        if isinstance(error, BaseException)
        else "",
        "topic": event.get("topic"),
        "partition": event.get("partition"),
        "offset": offset,
        "last_offset": event.get("last_offset"),
        "consumer": type(consumer).__name__ if consumer is not None else None,
        "attempt": event.get("attempt"),
        "process": process,
        "client_id": client_id,
        "at": time.time(),
    }
