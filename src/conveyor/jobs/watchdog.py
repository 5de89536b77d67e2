"""Time limits for plain (``def``) jobs: one thread that raises :class:`JobTimeoutError` in
the thread of a job that runs past its limit (as Dramatiq's time limits do, with CPython's
``PyThreadState_SetAsyncExc``). The exception lands at the job's next Python instruction: a
call blocked in C (a socket read, ``time.sleep``) ends first. ``async def`` jobs are
cancelled by ``asyncio.wait_for`` instead.

A limit and the job's end race: :meth:`Watchdog.guard` and the watchdog decide under one lock,
so the exception is raised only while the job's guard is still open; one that had not landed
when the block ended is cleared there, so it never lands after the guard."""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import itertools
import threading
import time
from collections.abc import Iterator

from conveyor.errors import ConveyorError

__all__ = ["JobTimeoutError", "Watchdog"]


class JobTimeoutError(ConveyorError, TimeoutError):
    """A job ran past its ``timeout`` and was interrupted.

    Raised when a plain (``def``) job of ``@app.job(timeout=...)`` runs past its limit: in the
    job's thread, at its next Python instruction (a call blocked in C ends first). An
    ``async def`` job is cancelled instead. Also a ``TimeoutError``.

    What to do: nothing at once: the job is retried like any failure, then goes to the
    dead-job topic. If it keeps timing out, raise ``timeout`` or make the job shorter (split
    it, or work in chunks); a ``finally`` in the job still runs.
    """


class _Watch:
    __slots__ = ("fired", "open", "thread_id")

    def __init__(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.open = True
        self.fired = False


class Watchdog:
    """Interrupts jobs that run past their limit (one daemon thread, started on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, _Watch]] = []
        self._sequence = itertools.count()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def guard(self, seconds: float) -> Iterator[None]:
        """Run the block with a limit of ``seconds``; past it, :class:`JobTimeoutError` is
        raised in this thread (inside the block)."""
        watch = _Watch(threading.get_ident())
        with self._changed:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._sequence), watch))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="conveyor-jobs-watchdog", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        try:
            yield
        finally:
            with self._lock:  # from here on the watchdog leaves this thread alone
                watch.open = False
                fired = watch.fired
            if fired:  # one raised just as the block ended and not landed yet: cleared
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(watch.thread_id), None)

    def _run(self) -> None:
        with self._changed:
            while True:
                while self._heap and not self._heap[0][2].open:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._changed.wait()
                    continue
                due, _, watch = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                heapq.heappop(self._heap)
                if watch.open and not watch.fired:
                    watch.fired = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(watch.thread_id), ctypes.py_object(JobTimeoutError)
                    )
