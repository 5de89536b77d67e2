"""Liveness for Kubernetes and friends: is this process still doing its job?

``app.liveness.check()`` reads ``app.snapshot()``: the app must be running (or quiet), every
listener must have polled within ``polling_ttl`` (librdkafka's ``max.poll.interval.ms`` by
default: past it the group has already given its partitions away) and no batch may have run
longer than ``consuming_ttl`` (a consumer stuck on a call that never returns; routes with
``long_running_job`` are left out). ``serve(port)``
answers ``GET /healthz`` with 200 and ``ok``, or 500 and the reasons, one per line (the
standard library's HTTP server on a thread of its own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.validation import check_seconds

if TYPE_CHECKING:
    from conveyor.routing.host import RoutedHost

__all__ = ["Health", "Liveness"]

_DEFAULT_POLL_INTERVAL_MS = 300_000  # librdkafka's max.poll.interval.ms


@dataclass(frozen=True)
class Health:
    """One check: ``ok``, and why not (each reason names the listener or the batch)."""

    ok: bool
    reasons: tuple[str, ...] = ()


class Liveness:
    """The liveness of one app (``app.liveness``)."""

    def __init__(self, app: RoutedHost, clock: Callable[[], float] = time.time) -> None:
        self.app = app
        self.consuming_ttl = 300.0
        kafka_interval = app.settings.kafka.get("max.poll.interval.ms", _DEFAULT_POLL_INTERVAL_MS)
        self.polling_ttl = float(kafka_interval) / 1000
        self._clock = clock
        self._server: ThreadingHTTPServer | None = None

    def configure(
        self, *, polling_ttl: float | None = None, consuming_ttl: float | None = None
    ) -> None:
        """Change the limits (seconds).

        Raises:
            ConfigurationError: a limit that is not a positive number.
        """
        if polling_ttl is not None:
            check_seconds("polling_ttl", polling_ttl)
            self.polling_ttl = float(polling_ttl)
        if consuming_ttl is not None:
            check_seconds("consuming_ttl", consuming_ttl)
            self.consuming_ttl = float(consuming_ttl)

    def check(self) -> Health:
        """The process's health now."""
        snapshot = self.app.snapshot()
        now = self._clock()
        reasons = []
        state = snapshot.process.state
        if state not in ("running", "quiet"):
            reasons.append(f"the app is {state}")
        for listener in snapshot.listeners:
            if listener.state == "crashed":
                reasons.append(f"listener {listener.name} crashed")
            elif listener.state in ("running", "quiet") and listener.last_poll_at is not None:
                silent = now - listener.last_poll_at
                if silent > self.polling_ttl:
                    reasons.append(
                        f"listener {listener.name} has not polled for {silent:.0f} s "
                        f"(limit {self.polling_ttl:g} s)"
                    )
        long_running = {r.name for r in self.app.routes if r.long_running_job}
        for job in snapshot.jobs:
            if job.topic in long_running:  # meant to outlast max.poll.interval.ms
                continue
            running = now - job.started_at
            if running > self.consuming_ttl:
                reasons.append(
                    f"a batch of {job.topic}/{job.partition} (offsets {job.first_offset}-"
                    f"{job.last_offset}) has run for {running:.0f} s (limit {self.consuming_ttl:g} s)"
                )
        return Health(not reasons, tuple(reasons))

    def serve(self, port: int = 0, host: str = "127.0.0.1") -> int:
        """Answer ``GET /healthz`` on ``host``:``port`` from now on; returns the port (useful
        with 0).

        Raises:
            ConfigurationError: already serving, or the port cannot be bound.
        """
        if self._server is not None:
            raise ConfigurationError("liveness is already served", "liveness_port")
        liveness = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/healthz":
                    self._answer(404, "only /healthz here\n")
                    return
                try:
                    health = liveness.check()
                except Exception as error:  # a check that fails is a failed check
                    health = Health(False, (f"the check failed: {error!r}",))
                body = "ok\n" if health.ok else "".join(f"{r}\n" for r in health.reasons)
                self._answer(200 if health.ok else 500, body)

            def _answer(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("content-type", "text/plain; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        try:
            server = ThreadingHTTPServer((host, port), Handler)
        except OSError as error:
            raise ConfigurationError(
                f"cannot serve liveness on {host}:{port}: {error}", "liveness_port"
            ) from None
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, name="conveyor-liveness", daemon=True).start()
        self.app.add_closing_hook(self.close)
        return int(server.server_address[1])

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
