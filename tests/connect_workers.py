"""Connect workers for the tests: ``conveyor connect worker`` as a user starts it, on a free
port, its log lines collected, driven through ``kafka-connect-py`` (an existing Kafka Connect
REST client from PyPI, unchanged)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_connect import KafkaConnect

from conveyor import Admin
from helpers import ServerProcess, free_port


def eventually(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    """``check()``'s first truthy answer, asked every 0.2 s for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what or check}")
        time.sleep(0.2)


class Worker(ServerProcess):
    """``conveyor connect worker`` on a free port, its log lines collected; ``plugins``: a
    folder of connector plugins the worker can import (named by import path);
    ``password_hash``: its REST API's (``$CONVEYOR_CONNECT_PASSWORD_HASH``), ``auth``
    (``user:password``) the client's."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        cwd: Path,
        plugins: Path | None = None,
        password_hash: str | None = None,
        auth: str | None = None,
    ) -> None:
        self.port = free_port()
        env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap)
        if password_hash is not None:
            env["CONVEYOR_CONNECT_PASSWORD_HASH"] = password_hash
        if plugins is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH")]))
        super().__init__(
            [
                sys.executable,
                "-m",
                "conveyor",
                "connect",
                "worker",
                "--port",
                str(self.port),
                "--group",
                group,
            ],
            env=env,
            cwd=cwd,
            read=("stdout", "stderr"),
        )
        self.wait_for(lambda lines: any("Uvicorn running" in line for line in lines))
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = KafkaConnect(url=self.url, auth=auth)


def delete_cluster_topics(bootstrap: str, group: str) -> None:
    """The topics of the connect cluster ``group`` (its configs, statuses, offsets, slots)."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        for topic in admin.list_topics():
            if topic.startswith(group):
                admin.delete_topic(topic)
