"""What every node of bench/scaling.py does per message, Conveyor's or bare: burn CPU for a
fixed time, and log each batch (``<monotonic time> <messages>``, flushed) to OUT_DIR/<pid>.txt
so that the benchmark can count across processes (``time.monotonic`` is one clock for every
process of the machine)."""

from __future__ import annotations

import os
import time
from pathlib import Path

WORK = float(os.environ.get("WORK_SECONDS", "0.00005"))  # 50 µs of CPU per message


def burn(count: int) -> None:
    """``WORK`` seconds of pure-Python CPU per message, ``count`` messages: this thread's CPU
    time, not the wall clock's (a thread waiting for the GIL, or a process waiting for a core,
    does not get its work done by waiting)."""
    end = time.thread_time() + WORK * count
    while time.thread_time() < end:
        pass


class BatchLog:
    """This process's batch log."""

    def __init__(self) -> None:
        path = Path(os.environ["OUT_DIR"]) / f"{os.getpid()}.txt"
        self._file = path.open("a", buffering=1)  # a line at a time: the bench reads it live

    def add(self, messages: int) -> None:
        self._file.write(f"{time.monotonic()} {messages}\n")
