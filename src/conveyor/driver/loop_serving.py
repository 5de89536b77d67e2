"""An event loop that serves its producer's delivery reports itself.

Without this, the poller thread serves every report and wakes an awaiting coroutine through
its loop's self-pipe: one hand-off between threads (and of the GIL) more than
``produce_sync``, which serves its own report in the waiting thread. librdkafka can instead
write a byte to a file descriptor when the queue of reports becomes non-empty
(``rd_kafka_queue_io_event_enable``); the loop watches that descriptor like any socket and
polls the producer itself, on its own thread, so the report settles the awaiting future
directly. One loop per producer does so: the first that produces on it (from a coroutine or
a callback running on the loop, awaited or not), and another one once that loop is closed.
The loop then serves everything the producer's queue gets: every thread's delivery reports
(their callbacks and the monitor's observers run on the loop), errors, statistics and
librdkafka's logs; keep those callbacks short. Other loops and threads that wait for a report
serve it themselves or are woken as before, and the poller stays out of the queue while the
loop serves it, serving only what a blocked loop leaves (see :mod:`conveyor.driver.poller`).

confluent-kafka does not expose that call (its pull request #1448 is open since 2022), so
this reaches it through ``ctypes``: the client object that confluent-kafka makes starts with
CPython's object header followed by its ``rd_kafka_t *``, and librdkafka is the shared library
confluent-kafka loaded. Each step is checked before use: a confluent-kafka major version whose
layout is known, exactly one librdkafka among the process's loaded libraries (or confluent-kafka's
own extension exporting it), and librdkafka's ``rd_kafka_opaque()`` of the pointer found must be
the client object itself (confluent-kafka sets it so). When any check fails, producers keep the
poller thread alone, as before; ``CONVEYOR_LOOP_SERVING=0`` switches this off on purpose.

A client with an ``oauth_cb`` is not served on a loop: the token provider may block.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import confluent_kafka

from conveyor.driver.loop_wakeups import running_loop as _running_loop

__all__ = ["LoopServing", "loop_serving", "loop_serving_available"]

_log = logging.getLogger("conveyor.driver")

SWITCH = "CONVEYOR_LOOP_SERVING"
"""Environment variable: ``0`` keeps every producer's reports on its poller thread."""

# confluent-kafka major versions whose client object is (PyObject_HEAD, rd_kafka_t *rk, ...).
_KNOWN_MAJORS = frozenset({2})


class _Librdkafka:
    """The few librdkafka functions used here, typed for ctypes."""

    def __init__(self, library: ctypes.CDLL) -> None:
        pointer = ctypes.c_void_p
        self.opaque = library.rd_kafka_opaque
        self.opaque.restype, self.opaque.argtypes = pointer, [pointer]
        self.main_queue = library.rd_kafka_queue_get_main
        self.main_queue.restype, self.main_queue.argtypes = pointer, [pointer]
        self.io_event = library.rd_kafka_queue_io_event_enable
        self.io_event.restype = None
        self.io_event.argtypes = [pointer, ctypes.c_int, pointer, ctypes.c_size_t]
        self.destroy_queue = library.rd_kafka_queue_destroy
        self.destroy_queue.restype, self.destroy_queue.argtypes = None, [pointer]


def _loaded_librdkafka() -> ctypes.CDLL | None:
    """The librdkafka that confluent-kafka uses, or None when it cannot be told for sure."""
    maps = Path("/proc/self/maps")
    paths: set[str] = set()
    if maps.exists():
        for line in maps.read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if "librdkafka" in Path(path).name:
                paths.add(path)
    if len(paths) > 1:
        return None  # two copies loaded: which one confluent-kafka calls is not certain
    candidates = [*paths, str(confluent_kafka.cimpl.__file__)]  # or linked into the extension
    for candidate in candidates:
        try:
            library = ctypes.CDLL(candidate)
        except OSError:
            continue
        if hasattr(library, "rd_kafka_queue_io_event_enable"):
            return library
    return None


@functools.cache
def _librdkafka() -> _Librdkafka | None:
    """The librdkafka functions, looked up once (None when not reachable safely)."""
    try:
        major = int(str(confluent_kafka.version()[0]).split(".")[0])
        found = _loaded_librdkafka() if major in _KNOWN_MAJORS else None
        return _Librdkafka(found) if found is not None else None
    except (OSError, AttributeError, ValueError) as exc:
        _log.debug("librdkafka's queue events are not reachable: %s", exc)
        return None


def _handle_of(client: Any, library: _Librdkafka) -> int | None:
    """The ``rd_kafka_t *`` of a confluent-kafka client object, checked (see the module)."""
    offset = object.__basicsize__
    if type(client).__basicsize__ < offset + ctypes.sizeof(ctypes.c_void_p):
        return None
    handle = ctypes.c_void_p.from_address(id(client) + offset).value
    if not handle or library.opaque(handle) != id(client):
        return None
    return int(handle)


def loop_serving_available() -> bool:
    """Whether producers can be served on an event loop in this process (see the module)."""
    return os.environ.get(SWITCH, "1") != "0" and _librdkafka() is not None


class LoopServing:
    """Lets one event loop at a time serve one producer's queue of reports.

    ``serve`` polls the producer once without waiting, in the calling thread (the poller's
    :meth:`~conveyor.driver.poller.Poller.serve_here`)."""

    def __init__(self, library: _Librdkafka, handle: int, serve: Callable[[], object]) -> None:
        self._library = library
        self._queue = library.main_queue(handle)  # a reference: given back in close()
        self._serve = serve
        # Kept (not weakly): a closed loop stays here, harmless, until another one attaches.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pipe: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def serves_running_loop(self) -> bool:
        """Whether the loop running in this thread serves the reports; the first loop that
        asks becomes the one (and another one once that loop is closed)."""
        loop = _running_loop()
        if loop is None:
            return False
        if self._loop is loop:
            return True
        return self._attach(loop)

    def serving(self) -> bool:
        """Whether a loop serves the reports now (attached, running, not closed)."""
        loop = self._loop
        return loop is not None and loop.is_running() and not self._closed

    def _attach(self, loop: asyncio.AbstractEventLoop) -> bool:
        with self._lock:
            if self._closed:
                return False
            current = self._loop
            if current is loop:
                return True
            if current is not None and not current.is_closed():
                return False  # another live loop serves: this one is woken the usual way
            read, write = _pipe()
            try:
                loop.add_reader(read, self._readable, read)
            except (NotImplementedError, RuntimeError):  # a loop without readers (Proactor)
                os.close(read)
                os.close(write)
                return False
            # librdkafka swaps the descriptor under the queue's lock: no byte goes to the old
            # pipe after this, and the old loop (closed) has no reader on it any more.
            self._library.io_event(self._queue, write, b"\x01", 1)
            old, self._pipe = self._pipe, (read, write)
            self._loop = loop
        if old is not None:
            _close(old)
        return True

    def _readable(self, read: int) -> None:
        # Read first, serve second: a report queued between the two is served now, and the
        # byte it wrote only wakes the loop once more for nothing.
        with contextlib.suppress(OSError):
            os.read(read, 4096)
        self._serve()

    def close(self) -> None:
        """Stop writing to the loop, give librdkafka its queue back (before the producer is
        destroyed), and drop the loop's reader on the loop's own thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._library.io_event(self._queue, -1, None, 0)
            self._library.destroy_queue(self._queue)
            loop, self._loop = self._loop, None
            pipe, self._pipe = self._pipe, None
        if pipe is None:
            return
        if loop is None or loop.is_closed():
            _close(pipe)
        elif _running_loop() is loop:
            _drop_reader(loop, pipe)
        else:
            # Closed on the loop's thread: closed here, its number could go to another file
            # while the loop still watches it.
            try:
                loop.call_soon_threadsafe(_drop_reader, loop, pipe)
            except RuntimeError:  # closed meanwhile
                _close(pipe)


def loop_serving(
    client: Any, config: Mapping[str, Any], serve: Callable[[], object]
) -> LoopServing | None:
    """A :class:`LoopServing` for a confluent-kafka producer, or None when it cannot have one
    (switched off, librdkafka not reachable safely, or an ``oauth_cb`` that may block)."""
    if "oauth_cb" in config or not loop_serving_available():
        return None
    library = _librdkafka()
    if library is None:
        return None
    handle = _handle_of(client, library)
    if handle is None:
        _log.debug("the producer's rd_kafka_t was not found: reports stay on the poller")
        return None
    return LoopServing(library, handle, serve)


def _pipe() -> tuple[int, int]:
    """A pipe whose two ends never block (librdkafka writes from its broker threads)."""
    read, write = os.pipe()
    for end in (read, write):
        os.set_blocking(end, False)
        os.set_inheritable(end, False)
    return read, write


def _close(pipe: tuple[int, int]) -> None:
    for end in pipe:
        with contextlib.suppress(OSError):
            os.close(end)


def _drop_reader(loop: asyncio.AbstractEventLoop, pipe: tuple[int, int]) -> None:
    with contextlib.suppress(Exception):
        loop.remove_reader(pipe[0])
    _close(pipe)
