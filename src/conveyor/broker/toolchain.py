"""Find the programs the development broker needs: Java 17+ and Maven."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from conveyor.errors import ToolMissingError

__all__ = ["MIN_JAVA_MAJOR", "find_java", "find_maven", "java_major_version"]

MIN_JAVA_MAJOR = 17

_FIX = (
    "or skip the development broker and point Conveyor at your own Kafka with "
    "KAFKA_BOOTSTRAP_SERVERS=host:port."
)


def find_java() -> Path:
    """Return a ``java`` executable of version 17 or newer (``JAVA_HOME`` first, then ``PATH``).

    Raises:
        ToolMissingError: no Java, or one older than 17.
    """
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate is None or not candidate.exists():
        found = shutil.which("java")
        candidate = Path(found) if found else None
    if candidate is None:
        raise ToolMissingError(
            "Java was not found (no JAVA_HOME, no `java` on PATH). The development broker is a "
            f"real Apache Kafka and runs on Java {MIN_JAVA_MAJOR} or newer: install a JDK "
            "(for example `apt-get install openjdk-17-jre-headless`) " + _FIX
        )
    major = java_major_version(candidate)
    if major < MIN_JAVA_MAJOR:
        raise ToolMissingError(
            f"{candidate} is Java {major}, and Kafka 4 needs Java {MIN_JAVA_MAJOR} or newer. "
            "Install a newer JDK and put it first on PATH (or set JAVA_HOME), " + _FIX
        )
    return candidate


def java_major_version(java: Path) -> int:
    """Read the major version that ``java -version`` reports (8 for ``1.8.0_x``)."""
    try:
        result = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"Could not run `{java} -version` ({exc}). " + _FIX) from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if not match:
        raise ToolMissingError(
            f"`{java} -version` printed no version this tool understands. " + _FIX
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


def find_maven() -> Path:
    """Return the ``mvn`` executable.

    Raises:
        ToolMissingError: Maven is not on ``PATH``.
    """
    found = shutil.which("mvn")
    if not found:
        raise ToolMissingError(
            "Maven (`mvn`) was not found on PATH. Conveyor fetches the Kafka broker's jars "
            "with Maven once and caches them; install it (for example `apt-get install maven`) "
            + _FIX
        )
    return Path(found)
