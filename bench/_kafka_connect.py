"""Kafka Connect 4.1.1 with Debezium 3.6.1.Final beside Conveyor's connect worker
(bench/connect.py): ``kafka-connect-peer/pom.xml``'s jars fetched with Maven like the broker (into
the same per-user cache) and a distributed worker (``ConnectDistributed``) run in a JVM of
its own with every jar on its classpath. Never a dependency of Conveyor."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conveyor.broker.maven import KAFKA_VERSION, cache_root
from conveyor.broker.toolchain import find_java, find_maven

__all__ = ["ConnectJvm", "RestWorker", "rest_call"]

POM = Path(__file__).resolve().parent / "kafka-connect-peer" / "pom.xml"
HEAP = "-Xmx512m"


def _jars() -> Path:
    """The jars of Kafka Connect and Debezium, fetched once (again when the pom changed)."""
    home = cache_root() / "bench-kafka-connect" / KAFKA_VERSION
    libs, stamp = home / "libs", home / "fetched.txt"
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return libs
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    subprocess.run(
        [str(find_maven()), "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
         f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    stamp.write_text(digest)
    return libs


def rest_call(url: str, method: str = "GET", body: Any = None) -> Any:
    """One call of a Connect REST API; its JSON answer (``None`` when empty)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


class RestWorker:
    """A connect worker in a process of its own, driven over Kafka Connect's REST API (either
    side of the benchmark: the API is the same)."""

    url: str
    process: subprocess.Popen[Any]

    def wait_ready(self, seconds: float, why: Callable[[], str]) -> None:
        """Return once the REST API answers (the worker joined its group)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                rest_call(f"{self.url}/connectors")
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the connect worker did not start: {why()}") from None
                time.sleep(0.2)

    def create(self, name: str, config: dict[str, Any]) -> None:
        rest_call(f"{self.url}/connectors", "POST", {"name": name, "config": config})

    def delete(self, name: str) -> None:
        rest_call(f"{self.url}/connectors/{name}", "DELETE")


class ConnectJvm(RestWorker):
    """A Kafka Connect distributed worker of its own group (and topics), on ``port``; with
    ``exactly_once``, exactly-once source support enabled (KIP-618)."""

    def __init__(self, bootstrap: str, port: int, group: str, exactly_once: bool = True) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.group = group
        self._folder = Path(tempfile.mkdtemp(prefix="conveyor-bench-connect-"))
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "listeners": f"http://127.0.0.1:{port}",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "exactly.once.source.support": "enabled" if exactly_once else "disabled",
            "offset.flush.interval.ms": "1000",
        }
        (self._folder / "worker.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in settings.items())
        )
        (self._folder / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, stderr\n"
            "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stderr.Target=System.err\n"
            "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stderr.layout.ConversionPattern=%d %p %c: %m%n\n"
        )
        self._log = (self._folder / "connect.log").open("w")
        self.process = subprocess.Popen(
            [str(find_java()), HEAP, f"-Dlog4j.configuration=file:{self._folder}/log4j.properties",
             "-cp", f"{_jars()}/*", "org.apache.kafka.connect.cli.ConnectDistributed",
             str(self._folder / "worker.properties")],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.wait_ready(180, self.log_tail)

    def log_tail(self) -> str:
        self._log.flush()
        return (self._folder / "connect.log").read_text()[-3000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()
        shutil.rmtree(self._folder, ignore_errors=True)
