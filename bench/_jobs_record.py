"""What every side's job does: append ``<done> <enqueued>`` (epoch seconds) to the file that
``$JOBS_OUT`` names, one line per job, from any thread or process (``O_APPEND`` writes of one
short line do not interleave; the file is opened on first use, after a worker's fork); and how
every side's enqueuer paces a steady run. Imports nothing of Conveyor: the peers' environment
runs it too."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

_opened: dict[int, int] = {}  # pid -> file descriptor


def record(enqueued: float) -> None:
    fd = _opened.get(os.getpid())
    if fd is None:
        fd = _opened[os.getpid()] = os.open(
            os.environ["JOBS_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
        )
    os.write(fd, f"{time.time():.6f} {enqueued:.6f}\n".encode())


def steady(send: Callable[[float], object], count: int, rate: float) -> None:
    """Call ``send(enqueued)`` ``count`` times at ``rate`` a second, ``enqueued`` the epoch
    seconds of the call; each call is due at ``n / rate`` after the start, not after the
    previous one returned, so a slow send does not lower the rate."""
    pause = threading.Event()
    started = time.monotonic()
    for n in range(count):
        wait = started + n / rate - time.monotonic()
        if wait > 0:
            pause.wait(wait)
        send(time.time())
