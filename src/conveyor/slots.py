"""A process's slot on its host: the lowest number that no live process of the same app holds.

A process that crashed loses its slot with its life (the operating system releases its
``flock``), so the process started after it takes the same number. That makes a name built
from the host and the slot stable across restarts and unique among the processes alive at
once: the app's transactional producer uses it as its ``transactional.id``, so that a
restarted process fences the transaction its crashed predecessor left open at once (Kafka
aborts it when the same id initializes again) instead of after ``transaction.timeout.ms``.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import tempfile
import threading
from pathlib import Path

__all__ = ["host_slot", "previous_use", "record_use", "slot"]

_MAX_SLOTS = 4096
_held: dict[tuple[str, Path], tuple[int, int, int]] = {}
"""(name, folder) -> (pid, slot, descriptor): the descriptor stays open while the process lives."""
_previous: dict[tuple[str, Path], str] = {}
"""(name, folder) -> what the slot's file said when this process took it (its predecessor's)."""
_lock = threading.Lock()


def slot(name: str, folder: Path | None = None) -> int:
    """This process's slot for ``name`` (held for the process's life; the same on each call).

    A forked child takes a slot of its own (a swarm node is a process of its own)."""
    where = folder if folder is not None else _default_folder()
    key = (name, where)
    with _lock:
        held = _held.get(key)
        if held is not None:
            if held[0] == os.getpid():
                return held[1]
            os.close(held[2])  # a forked child's copy: the parent keeps its own slot
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        for number in range(_MAX_SLOTS):
            descriptor = os.open(where / f"{safe}.{number}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(descriptor)
                continue
            _held[key] = (os.getpid(), number, descriptor)
            _previous[key] = os.pread(descriptor, 256, 0).decode("utf-8", "replace").strip()
            return number
    raise RuntimeError(f"no free slot for {name!r} in {where} ({_MAX_SLOTS} are held)")


def previous_use(name: str, folder: Path | None = None) -> str:
    """What this process's predecessor in its slot recorded (:func:`record_use`), or ``""``:
    a process that finds ``"transactional"`` there fences the transaction it may have left."""
    where = folder if folder is not None else _default_folder()
    slot(name, where)
    with _lock:
        return _previous.get((name, where), "")


def record_use(name: str, use: str, folder: Path | None = None) -> None:
    """Record ``use`` in this process's slot, for the process that takes the slot next."""
    where = folder if folder is not None else _default_folder()
    slot(name, where)
    with _lock:
        descriptor = _held[(name, where)][2]
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, use.encode(), 0)


def host_slot(name: str) -> str:
    """``<host name>-<slot>``: this process's stable name among the live ones of ``name``."""
    return f"{socket.gethostname()}-{slot(name)}"


def _default_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"conveyor-slots-{os.getuid()}"
