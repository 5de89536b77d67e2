"""A real Schema Registry compatible server for the schema tests: Apicurio Registry (its
Confluent-compatible API under /apis/ccompat/v7), fetched from Maven Central with Maven into
~/.cache/conveyor/apicurio/ and run as a JVM with in-memory storage."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers import free_port

VERSION = "2.6.13.Final"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:zip:all"
HOME = (
    Path(os.environ.get("CONVEYOR_CACHE", Path.home() / ".cache" / "conveyor"))
    / "apicurio"
    / VERSION
)
RUNNER = HOME / f"apicurio-registry-app-{VERSION}-runner.jar"


def fetch() -> Path:
    """The registry's runner jar (fetched and unpacked once)."""
    if RUNNER.exists():
        return RUNNER
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("the schema tests need Maven (mvn) to fetch Apicurio Registry")
    HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={HOME}"],
        check=True, timeout=1800,
    )  # fmt: skip
    archive = HOME / f"apicurio-registry-app-{VERSION}-all.zip"
    with zipfile.ZipFile(archive) as packed:
        packed.extractall(HOME)
    archive.unlink()
    return RUNNER


@contextmanager
def running_registry() -> Iterator[str]:
    """Start the registry on a free port; its Confluent-compatible URL until the block ends."""
    runner = fetch()
    port = free_port()
    process = subprocess.Popen(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dquarkus.http.port={port}",
         "-Dquarkus.http.host=127.0.0.1", "-jar", str(runner)],
        cwd=runner.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        pause = threading.Event()
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Apicurio Registry did not start")
            pause.wait(0.25)  # another process is starting: nothing to wait on but its port
        yield f"{base}/apis/ccompat/v7"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
