"""A throwaway PostgreSQL cluster for the connector benchmarks (Debian's ``postgresql``, as the
tests use it): initdb in a temporary folder, on a free port, trust authentication on
127.0.0.1, ``wal_level=logical`` for change data capture; stopped and removed after."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["free_port", "postgres_cluster"]


def free_port() -> int:
    """A port no one listens on now, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """``postgresql://...`` of a fresh cluster, removed on exit."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("the connector benchmark needs PostgreSQL (make postgresql installs it)")
    binaries = Path(initdb).parent
    folder = Path(tempfile.mkdtemp(prefix="conveyor-bench-pg-"))
    owner: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        folder.chmod(0o755)
        owner = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", free_port()
    subprocess.run(
        [*owner, str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "conveyor",
         "--no-sync", "-E", "UTF8"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    options = (
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c wal_level=logical -c max_wal_senders=10 -c max_replication_slots=40"
    )
    subprocess.run(
        [*owner, str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l",
         str(folder / "log"), "-w", "-t", "60", "start"],
        check=True, capture_output=True, timeout=90,
    )  # fmt: skip
    try:
        yield f"postgresql://conveyor@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*owner, str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(folder, ignore_errors=True)
