"""A real local HTTP server for the Webhook's unit tests: it logs each request's record as it
arrives and as it is answered, and can choose each answer's status or hold it back."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Recorder"]


class Recorder(ThreadingHTTPServer):
    """Logs each request's (key, offset) as it arrives and as it is answered; ``status``
    chooses each answer's status, ``hold`` may keep an answer back until an event is set."""

    daemon_threads = True

    def __init__(
        self,
        status: Callable[[str, int], int] = lambda _key, _offset: 204,
        hold: Callable[[str, int], threading.Event | None] = lambda _key, _offset: None,
        idle: float = 30.0,
    ) -> None:
        self.log: list[tuple[str, str, int]] = []  # ("in" | "out", key, offset)
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.most_in_flight = 0
        self.overlaps_per_key = 0
        self.connections = 0
        self.closed = threading.Semaphore(0)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server.connections += 1

            def finish(self) -> None:
                super().finish()
                server.closed.release()

            def do_POST(self) -> None:
                record = json.loads(self.rfile.read(int(self.headers["content-length"])))
                key, offset = record["key"], record["offset"]
                with server.lock:
                    server.log.append(("in", key, offset))
                    server.overlaps_per_key += server.in_flight.get(key, 0)
                    server.in_flight[key] = server.in_flight.get(key, 0) + 1
                    server.most_in_flight = max(
                        server.most_in_flight, sum(server.in_flight.values())
                    )
                held = hold(key, offset)
                if held is not None:
                    held.wait(10)
                code = status(key, offset)
                with server.lock:
                    server.in_flight[key] -= 1
                    server.log.append(("out", key, offset))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    @property
    def requests(self) -> int:
        return len(self.arrived())

    def arrived(self) -> list[tuple[str, int]]:
        return [(key, offset) for kind, key, offset in self.log if kind == "in"]
