"""Java and Maven are found, and their absence is explained in one paragraph."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from conveyor.broker.toolchain import find_java, find_maven, java_major_version
from conveyor.errors import ToolMissingError


def _fake_java(folder: Path, version_line: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


@pytest.mark.parametrize(
    ("line", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_292"', 8),
    ],
)
def test_reads_the_major_version(tmp_path: Path, line: str, major: int) -> None:
    assert java_major_version(_fake_java(tmp_path, line)) == major


def test_old_java_is_refused_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_java(tmp_path, 'java version "1.8.0_292"')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(ToolMissingError, match=r"Java 8.*17 or newer.*KAFKA_BOOTSTRAP_SERVERS"):
        find_java()


def test_missing_java_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissingError, match=r"Java was not found.*install a JDK"):
        find_java()


def test_missing_maven_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissingError, match=r"Maven .*install it"):
        find_maven()
