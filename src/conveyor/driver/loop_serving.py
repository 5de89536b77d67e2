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
this reaches it through ``ctypes``, with the producer's ``rd_kafka_t *`` read out of
confluent-kafka's client object (its C struct ``Handle``: CPython's object header, then
``rd_kafka_t *rk``, then ``PyObject *error_cb, *throttle_cb, *stats_cb``). A wrong pointer
handed to librdkafka would crash the process, so nothing reaches librdkafka before these checks
pass, in this order (:func:`_refusal`, then :func:`handle_of`):

1. ``CONVEYOR_LOOP_SERVING`` is not ``0`` (the switch that turns this off on purpose);
2. the interpreter is CPython (``id()`` is an object's address there, and only there);
3. confluent-kafka's version is in :data:`TESTED_CONFLUENT_KAFKA`: the versions whose
   ``Handle`` was read in their source and checked here. The version is what pins the layout:
   that the word after the object header is ``rk`` is taken from it, not proven at run time;
4. exactly one librdkafka among the process's loaded libraries (or confluent-kafka's own
   extension exporting it), the one confluent-kafka calls;
5. the client is an instance of confluent-kafka's C ``Producer`` type, so its memory spans at
   least that type's size and the words read below lie inside the object; the three words
   after ``rk`` must be the client's callbacks: the non-null ones, in order, are the very
   objects the client's own garbage-collector traversal reports (``gc.get_referents``), and
   at least one is (Conveyor always gives an ``error_cb``). This reads nothing outside the
   object, so it cannot crash; it proves the object in hand is laid out as the version's
   source says (not, say, with another build's header or another ABI), so the word before the
   callbacks is, by that source, the ``rk`` confluent-kafka stored: a live ``rd_kafka_t``
   (confluent-kafka sets it to NULL when it destroys it; a NULL one is refused). So the
   allow-list is the proof that ``rk`` is that word; the check is the proof that this object
   is the one the allow-list speaks of. Only then is ``rk`` passed to
   librdkafka, whose ``rd_kafka_opaque(rk)`` must give back the client object itself
   (confluent-kafka sets it so): a confirmation, no longer the proof.

When a check fails, producers keep the poller thread alone (the same reports, in the same
order; an awaited produce costs one hand-off between threads more), and the first refusal is
logged once per process, at INFO (:func:`_fall_back`).

A client with an ``oauth_cb`` is not served on a loop: the token provider may block.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import confluent_kafka

from conveyor.driver.loop_wakeups import running_loop as _running_loop

__all__ = [
    "TESTED_CONFLUENT_KAFKA",
    "LoopServing",
    "handle_of",
    "librdkafka",
    "loop_serving",
    "loop_serving_available",
    "native_refusal",
]

_log = logging.getLogger("conveyor.driver")

SWITCH = "CONVEYOR_LOOP_SERVING"
"""Environment variable: ``0`` keeps every producer's reports on its poller thread."""

# The confluent-kafka versions (as confluent_kafka.version() names them) whose client object
# layout is tested; any other version keeps the poller thread. To add one: read the `Handle`
# struct in that release's src/confluent_kafka/src/confluent_kafka.h (PyObject_HEAD, then
# rd_kafka_t *rk, then PyObject *error_cb, *throttle_cb, *stats_cb, in that order; a field
# added before or between them is a new layout: change _RK_WORD/_CALLBACK_WORDS first), add
# the version here, install it, and run tests/unit/driver/test_loop_serving.py and
# tests/integration/producer/test_loop_serving.py (which expect this version to be served).
TESTED_CONFLUENT_KAFKA: frozenset[str] = frozenset({"2.16.1"})

# Where the Handle keeps them, in pointer-sized words after CPython's object header.
_RK_WORD = 0
_CALLBACK_WORDS = (1, 2, 3)  # error_cb, throttle_cb, stats_cb


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
        # a consumer's queue, and the call that ends a wait on it (conveyor.driver.consumer_wake)
        self.consumer_queue = library.rd_kafka_queue_get_consumer
        self.consumer_queue.restype, self.consumer_queue.argtypes = pointer, [pointer]
        self.queue_yield = library.rd_kafka_queue_yield
        self.queue_yield.restype, self.queue_yield.argtypes = None, [pointer]


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
    """The librdkafka functions, looked up once (None when not reachable safely). Only asked
    once the interpreter and confluent-kafka's version have passed (see :func:`_refusal`)."""
    try:
        found = _loaded_librdkafka()
        return _Librdkafka(found) if found is not None else None
    except (OSError, AttributeError, ValueError) as exc:
        _log.debug("librdkafka's queue events are not reachable: %s", exc)
        return None


def librdkafka() -> _Librdkafka | None:
    """The librdkafka functions this module and :mod:`~conveyor.driver.consumer_wake` call,
    once :func:`native_refusal` has nothing to say (None otherwise)."""
    return None if native_refusal() is not None else _librdkafka()


def _confluent_kafka_version() -> str:
    """confluent-kafka's version: ``version()`` gives a string (older releases gave
    ``(string, int)``)."""
    version: Any = confluent_kafka.version()
    return str(version[0] if isinstance(version, tuple) else version)


def _refusal() -> str | None:
    """Why no producer of this process can be served on a loop (steps 1-4 of the module), said
    for an operator, or None when they can."""
    if os.environ.get(SWITCH, "1") == "0":
        return f"{SWITCH}=0 switches it off (unset it to turn it back on)"
    return native_refusal()


def native_refusal() -> str | None:
    """Why librdkafka cannot be called on a client's ``rd_kafka_t`` in this process (steps 2-4
    of the module), said for an operator, or None when it can."""
    if sys.implementation.name != "cpython":
        return (
            f"the interpreter is {sys.implementation.name}, not CPython "
            "(no switch turns it on there)"
        )
    version = _confluent_kafka_version()
    if version not in TESTED_CONFLUENT_KAFKA:
        tested = ", ".join(sorted(TESTED_CONFLUENT_KAFKA))
        return (
            f"confluent-kafka {version} is not a version whose client layout Conveyor has "
            f"tested ({tested}); no switch turns it on for another version: install a tested "
            "one, or a Conveyor release that lists this one"
        )
    if _librdkafka() is None:
        return "the librdkafka that confluent-kafka calls could not be told for certain"
    return None


class _Told:
    """Whether the fallback was logged in this process."""

    lock = threading.Lock()
    done = False


def _fall_back(reason: str) -> None:
    """Log once per process that producers keep the poller thread, and why. At INFO, not
    WARNING: nothing is wrong and nothing needs doing (the poller gives the same reports, in
    the same order; an awaited produce only costs one hand-off between threads more), so a
    WARNING from every process on an untested confluent-kafka would ask operators to act
    where nothing is to be done; one looking for the missing speed-up finds the reason here."""
    with _Told.lock:
        if _Told.done:
            return
        _Told.done = True
    _log.info(
        "Producers' delivery reports are served by their poller threads, not by event loops: %s",
        reason,
    )


def handle_of(client: Any, library: _Librdkafka, base: type | None = None) -> int | None:
    """The ``rd_kafka_t *`` of a confluent-kafka client, a producer unless ``base`` says which
    type (``confluent_kafka.cimpl.Consumer``: the same ``Handle`` struct), proven before
    librdkafka sees it (step 5 of the module), or None."""
    base = base or confluent_kafka.cimpl.Producer
    header, word = object.__basicsize__, ctypes.sizeof(ctypes.c_void_p)
    words = (_RK_WORD, *_CALLBACK_WORDS)
    if not isinstance(client, base) or base.__basicsize__ < header + (max(words) + 1) * word:
        return None  # not confluent-kafka's object: its memory may be shorter than the reads
    address = id(client) + header

    def read(n: int) -> int:
        return ctypes.c_void_p.from_address(address + n * word).value or 0

    rk = read(_RK_WORD)
    callbacks = [value for value in map(read, _CALLBACK_WORDS) if value]
    if not rk or not callbacks or not _run_in(callbacks, [id(r) for r in gc.get_referents(client)]):
        return None
    if library.opaque(rk) != id(client):
        return None
    return rk


def _run_in(run: list[int], values: list[int]) -> bool:
    """Whether ``run`` occurs in ``values`` as consecutive items."""
    return any(values[i : i + len(run)] == run for i in range(len(values) - len(run) + 1))


def loop_serving_available() -> bool:
    """Whether producers can be served on an event loop in this process (see the module)."""
    return _refusal() is None


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
    (a check of the module failed, told once per process, or an ``oauth_cb`` that may block)."""
    if "oauth_cb" in config:
        return None
    refusal = _refusal()
    library = _librdkafka() if refusal is None else None
    if library is None:
        _fall_back(refusal or "librdkafka is not reachable")
        return None
    handle = handle_of(client, library)
    if handle is None:
        _fall_back(
            f"the producer object is not laid out as confluent-kafka "
            f"{_confluent_kafka_version()}'s is known to be (its rd_kafka_t was not proven)"
        )
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
