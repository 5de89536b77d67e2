"""A connect worker of a cluster of its own (``worker``), and a throwaway PostgreSQL cluster
for the PostgreSQL sink's tests (Debian's ``postgresql``;
``make test`` installs it when missing): initdb in a temporary folder, on a free port, trust
authentication on 127.0.0.1, stopped and removed after the session."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from connect_workers import Worker, delete_cluster_topics
from helpers import free_port


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        pytest.fail(
            "the PostgreSQL sink's tests need initdb and pg_ctl: install Debian's package "
            "'postgresql' (make test does when run as root)"
        )
    return Path(initdb).parent


def _as_owner(command: list[str], owner: str | None) -> list[str]:
    """initdb and postgres refuse to run as root: run them as ``owner`` then."""
    return command if owner is None else ["runuser", "-u", owner, "--", *command]


@dataclass(frozen=True)
class PostgresServer:
    """The session's PostgreSQL: its ``dsn``, and :meth:`restart` (a fast shutdown, then a
    start: every connection to it is cut)."""

    dsn: str
    start: Callable[[], None]
    stop: Callable[[], None]

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """``postgresql://...`` of a fresh cluster for this session."""
    return postgres_server.dsn


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A fresh cluster for this session (``wal_level=logical``: change data capture)."""
    binaries = _binaries()
    folder = tmp_path_factory.mktemp("postgres")
    data = folder / "data"
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        try:
            entry = pwd.getpwnam(owner)
        except KeyError:
            pytest.fail("running as root, the tests need the 'postgres' user (Debian's package)")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        folder.chmod(0o755)
        for parent in folder.parents:  # the cluster's owner must reach its folder
            if str(parent).startswith(tempfile_root()):
                parent.chmod(parent.stat().st_mode | 0o011)
    port = free_port()
    subprocess.run(
        _as_owner([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "conveyor",
                   "--no-sync", "-E", "UTF8"], owner),
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    # track_commit_timestamp: the crash test compares each row's COMMIT time with Kafka's commits
    options = (
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c track_commit_timestamp=on"
        " -c wal_level=logical -c max_wal_senders=10 -c max_replication_slots=10"
    )

    def start() -> None:
        subprocess.run(
            _as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                       str(folder / "log"), "-w", "-t", "60", "start"], owner),
            check=True, capture_output=True, timeout=90,
        )  # fmt: skip

    def stop() -> None:
        subprocess.run(
            _as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], owner),
            check=False, capture_output=True, timeout=60,
        )  # fmt: skip

    start()
    try:
        yield PostgresServer(f"postgresql://conveyor@127.0.0.1:{port}/postgres", start, stop)
    finally:
        stop()


def tempfile_root() -> str:
    import tempfile  # noqa: PLC0415

    return tempfile.gettempdir()


@pytest.fixture
def worker(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Worker]:
    """One worker of a connect cluster of its own, stopped (cleanly) after the test."""
    group = f"connect-{uuid.uuid4().hex[:8]}"
    started = Worker(kafka_bootstrap, group, tmp_path)
    try:
        yield started
    finally:
        assert started.stop(timeout=90) == 0, "\n".join(started.lines[-40:])
        delete_cluster_topics(kafka_bootstrap, group)
