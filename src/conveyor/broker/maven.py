"""Fetch the Kafka broker's jars with Maven, once per version, into a per-user cache."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections import deque
from importlib import resources
from pathlib import Path

from conveyor.broker.progress import ProgressCallback
from conveyor.broker.toolchain import find_maven
from conveyor.errors import BrokerError

__all__ = ["KAFKA_VERSION", "cache_root", "ensure_kafka_jars", "kafka_libs_dir"]

KAFKA_VERSION = "4.1.1"
"""The Apache Kafka release the development broker runs."""


_COMPLETE_MARKER = ".complete"
_DOWNLOADED = re.compile(r"Downloaded from \S+: (\S+)")
_COPYING = re.compile(r"Copying (\S+\.jar)")


def cache_root() -> Path:
    """The per-user cache folder: ``$CONVEYOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/conveyor``, else ``~/.cache/conveyor``."""
    explicit = os.environ.get("CONVEYOR_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "conveyor"


def kafka_libs_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the jars of one Kafka version live once fetched."""
    return cache_root() / "kafka" / version / "libs"


def ensure_kafka_jars(
    on_progress: ProgressCallback | None = None, version: str = KAFKA_VERSION
) -> Path:
    """Return the folder of Kafka's jars, fetching them with Maven the first time.

    Concurrent callers (two ``make`` targets at once) are serialized by a file lock;
    a fetch that fails half-way leaves nothing behind that a later call would trust.

    Raises:
        ToolMissingError: Maven is needed and missing.
        BrokerError: Maven failed; the message carries the end of its output.
    """
    target = kafka_libs_dir(version)
    if (target / _COMPLETE_MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / "fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / _COMPLETE_MARKER).exists():
            return target
        _fetch(target, version, on_progress or (lambda _line: None))
    return target


def _fetch(target: Path, version: str, on_progress: ProgressCallback) -> None:
    mvn = find_maven()
    work = target.parent
    partial = work / "libs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    pom = work / "pom.xml"
    pom.write_bytes(resources.files("conveyor.broker").joinpath("pom.xml").read_bytes())
    command = [
        str(mvn),
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={partial}",
        "-DincludeScope=runtime",
        f"-Dkafka.version={version}",
    ]
    on_progress(f"fetching Apache Kafka {version} with Maven (once; cached in {work})")
    tail: deque[str] = deque(maxlen=25)
    copied = downloaded_count = 0
    process = subprocess.Popen(
        command,
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    with process.stdout:
        for line in process.stdout:
            tail.append(line.rstrip())
            if downloaded := _DOWNLOADED.search(line):
                downloaded_count += 1
                if downloaded_count % 10 == 1:
                    name = downloaded.group(1).rsplit("/", 1)[-1]
                    on_progress(f"downloaded {downloaded_count} files (now {name})")
            elif _COPYING.search(line):
                copied += 1
    if process.wait() != 0:
        raise BrokerError(
            f"Maven could not fetch Apache Kafka {version} (exit code {process.returncode}). "
            "Check that Maven Central is reachable (a proxy or mirror in ~/.m2/settings.xml), "
            "then run the command again. The end of Maven's output:\n" + "\n".join(tail)
        )
    if not any(partial.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"Maven finished but the Kafka jar is not in {partial}; the cache may be damaged. "
            f"Delete {work} and try again."
        )
    (partial / _COMPLETE_MARKER).write_text(version + "\n")
    partial.rename(target)
    on_progress(f"Apache Kafka {version}: {copied} jars ready in {target}")
