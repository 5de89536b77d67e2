"""What every side's job does: append ``<done> <enqueued>`` (epoch seconds) to the file that
``$JOBS_OUT`` names, one line per job, from any thread or process (``O_APPEND`` writes of one
short line do not interleave; the file is opened on first use, after a worker's fork)."""

from __future__ import annotations

import os
import time

_opened: dict[int, int] = {}  # pid -> file descriptor


def record(enqueued: float) -> None:
    fd = _opened.get(os.getpid())
    if fd is None:
        fd = _opened[os.getpid()] = os.open(
            os.environ["JOBS_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
        )
    os.write(fd, f"{time.time():.6f} {enqueued:.6f}\n".encode())
