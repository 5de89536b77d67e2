"""Kafka Streams beside Conveyor (bench/stateful.py): ``kafka_streams/StateBench.java``,
compiled against Kafka Streams 4.1.1 (fetched with Maven like the broker, into the same
per-user cache) with the JDK that runs the broker, and run in a JVM of its own. Never a
dependency of Conveyor."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import uuid
from pathlib import Path

from conveyor import Admin
from conveyor.broker.maven import KAFKA_VERSION, cache_root
from conveyor.broker.toolchain import find_java, find_maven

__all__ = ["kafka_streams", "kafka_streams_restore"]

SOURCES = Path(__file__).resolve().parent / "kafka_streams"
HEAP = "-Xmx512m"


def _built() -> tuple[Path, Path]:
    """Kafka Streams' jars and StateBench's classes, fetched and compiled once (again when
    the Java source or the pom changed)."""
    home = cache_root() / "bench-kafka-streams" / KAFKA_VERSION
    libs, classes = home / "libs", home / "classes"
    stamp = home / "built.txt"
    digest = hashlib.sha256(
        (SOURCES / "pom.xml").read_bytes() + (SOURCES / "StateBench.java").read_bytes()
    ).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return libs, classes
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    subprocess.run(
        [str(find_maven()), "-B", "-q", "-f", str(SOURCES / "pom.xml"),
         "dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    javac = Path(find_java()).resolve().parent / "javac"
    subprocess.run(
        [str(javac), "-d", str(classes), "-cp", f"{libs}/*", str(SOURCES / "StateBench.java")],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    stamp.write_text(digest)
    return libs, classes


def kafka_streams(bootstrap: str, topic: str, count: int, variant: str, folder: Path) -> float:
    """Kafka Streams' msgs/s over ``topic`` (``variant``: ``count`` or ``window``); its
    changelog topics are deleted after."""
    libs, classes = _built()
    application = f"bench-kstreams-{uuid.uuid4().hex[:8]}"
    try:
        done = subprocess.run(
            [str(find_java()), HEAP, "-cp", f"{libs}/*:{classes}", "StateBench", bootstrap,
             topic, str(count), variant, str(folder), application],
            capture_output=True, text=True, timeout=900, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for name in admin.list_topics():
                if name.startswith(application):
                    admin.delete_topic(name)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Kafka Streams failed: {done.stderr[-2000:]}")
    return float(json.loads(lines[-1])["rate"])


def kafka_streams_restore(
    bootstrap: str, topic: str, application: str, partitions: int, folder: Path
) -> tuple[int, float]:
    """Kafka Streams restores its count store from ``APPLICATION-counts-changelog`` (filled by
    the caller) into the empty ``folder``; the records and seconds its restore listener saw."""
    libs, classes = _built()
    done = subprocess.run(
        [str(find_java()), HEAP, "-cp", f"{libs}/*:{classes}", "StateBench", bootstrap, topic,
         "0", "restore", str(folder), application, str(partitions)],
        capture_output=True, text=True, timeout=1200, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"Kafka Streams failed: {done.stderr[-2000:]}")
    found = json.loads(lines[-1])
    return int(found["records"]), float(found["seconds"])
