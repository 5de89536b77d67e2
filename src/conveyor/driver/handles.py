"""Handles for results that librdkafka reports later: deliveries and admin operations.

A handle is completed by the thread that sees the result (the client's poller thread
runs the delivery callback; a timed-out delivery's, the producer's explainer thread, once the
cluster said whether its topic exists) and wakes its waiters at that moment: the waiter blocks
on a lock that the completing thread releases, never on a sleep. Waits end at a monotonic
deadline with :class:`~conveyor.errors.WaitTimeoutError`.

Delivery handles are awaitable too: ``await handle`` gives the report (or raises) in a
coroutine, woken through its event loop when the report is served (see :mod:`conveyor.driver.loop_wakeups`);
nothing waits in a thread and nothing polls.

The handles are lean on purpose: ``produce_async`` creates one per message, so a
handle allocates nothing else until someone waits on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from conveyor.driver.delivery_errors import EXPLAINED, Clarified, asks_the_cluster, delivery_error
from conveyor.driver.errors import to_conveyor_error
from conveyor.driver.explainer import Clarify, Verdicts
from conveyor.driver.loop_wakeups import loop_future, settle
from conveyor.errors import BatchDeliveryError, DeliveryError, KafkaError, WaitTimeoutError

__all__ = [
    "AcknowledgedHandle",
    "BatchDeliveryHandle",
    "DeliveryHandle",
    "DeliveryObserver",
    "DeliveryReport",
    "FutureHandle",
    "Lead",
]

T = TypeVar("T")

_PENDING, _DONE = 0, 1
_FOREVER = 365 * 24 * 3600.0

DeliveryObserver = Callable[[str, int, int, DeliveryError | None, Any], None]
"""Hears of deliveries: ``(topic, partition, offset, failure or None, label)``."""

Lead = Callable[[Callable[[], bool], float], bool]
"""``lead(done, deadline)``: serve the client's callbacks in this thread until ``done()`` or
the monotonic deadline; False when someone else serves them (then wait as usual)."""


def _tell(
    observer: DeliveryObserver, error: Any, message: Any, label: Any, missing: bool | None = None
) -> None:
    """Pass one delivery to ``observer`` in Conveyor's terms (no librdkafka object leaves)."""
    topic, partition = message.topic(), message.partition()
    failure = None if error is None else delivery_error(error, topic, partition, label, missing)
    observer(topic, partition, message.offset(), failure, label)


_waiter_creation = threading.Lock()


def _call_back(callback: Callable[[Any], None], handle: Any) -> None:
    try:
        callback(handle)
    except Exception:
        logging.getLogger("conveyor").exception("a delivery handle's done callback raised")


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """Where a message landed: its topic, partition and offset, as the broker acknowledged it.

    ``timestamp`` is the message timestamp in milliseconds since the epoch (``None`` when the
    broker did not report one);
    ``label`` whatever the caller attached to the message.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    label: Any = None


def _report(message: Any, label: Any) -> DeliveryReport:
    kind, timestamp = message.timestamp()
    return DeliveryReport(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        timestamp=timestamp if kind else None,
        label=label,
    )


class _Waitable:
    """Completion flag plus a lazily created lock that the completing thread releases."""

    __slots__ = ("_lead", "_settle", "_state", "_waiter")

    def __init__(self) -> None:
        self._state = _PENDING
        self._waiter: Any = None
        self._lead: Lead | None = None
        self._settle: list[Callable[[], None]] | None = None

    def done(self) -> bool:
        """Whether the result (or the failure) is in."""
        return self._state == _DONE

    def _complete(self) -> None:
        self._state = _DONE
        waiter = self._waiter
        if waiter is not None:
            with contextlib.suppress(RuntimeError):  # completed twice (a truncated batch)
                waiter.release()
        self._wake_awaits()

    def _wake_awaits(self) -> None:
        if self._settle is not None:
            with _waiter_creation:
                settle, self._settle = self._settle, None
            for wake in settle or ():
                wake()

    def _until_done(self) -> Generator[Any, None, None]:
        """Await completion on the running loop (``yield from`` it in ``__await__``)."""
        if self._state == _DONE:
            return
        future, wake = loop_future()
        with _waiter_creation:
            self._settle = [*(self._settle or ()), wake]
        # _complete marks the state done first and looks for awaits second; this looks at
        # the state after registering, so one of the two sees the other (and the list is
        # taken under the lock: woken once).
        if self._state == _DONE:
            self._wake_awaits()
        yield from future.__await__()

    def _block(self, timeout: float | None) -> None:
        if self._state == _DONE:
            return
        lead = self._lead
        if lead is not None:
            deadline = time.monotonic() + (timeout if timeout is not None else _FOREVER)
            if lead(self.done, deadline):
                if self._state == _DONE:
                    return
                raise WaitTimeoutError(
                    f"no result within {timeout:.3f} s; the operation may still complete later"
                )
        with _waiter_creation:
            waiter = self._waiter
            if waiter is None:
                waiter = threading.Lock()
                waiter.acquire()
                self._waiter = waiter
        # Published the waiter before this re-check: the completing thread either saw it
        # (and will release it) or completed before it (and this check sees that).
        if self._state == _DONE:
            return
        if waiter.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            waiter.release()  # let any other waiter of this handle through too
            return
        if self._state != _DONE:
            raise WaitTimeoutError(
                f"no result within {timeout:.3f} s; the operation may still complete later"
            )


# Threads blocked in DeliveryHandle.wait(), by handle. Kept outside the handles so that a
# handle nobody waits on is three attribute stores and nothing more.
_single_waiters: dict[DeliveryHandle, Any] = {}
# Awaits of DeliveryHandles, by handle: the loop future to settle (one await per handle here,
# the common case; a second one registers a done callback).
_awaits: dict[DeliveryHandle, asyncio.Future[None]] = {}
# Callbacks registered with DeliveryHandle.add_done_callback(), by handle; same reason.
_done_callbacks: dict[DeliveryHandle, list[Callable[[DeliveryHandle], None]]] = {}
_callbacks_lock = threading.Lock()


class DeliveryHandle:
    """The future delivery report of one message (what ``produce_async`` returns).

    ``wait(timeout)`` blocks until librdkafka reports the delivery and returns the
    :class:`DeliveryReport`, or raises :class:`~conveyor.errors.DeliveryError`;
    ``done()`` says whether the report is in; ``result()`` returns it without waiting.

    A producer makes one per message, so the handle is as small as Python allows: no
    ``__init__`` to run, the few numbers of the report instead of librdkafka's message
    object (with many messages in flight every object kept alive is work for the garbage
    collector, and on this path that work is what limits throughput), and waiters kept
    aside until someone actually waits.
    """

    __slots__ = ("_error", "_fields", "_label")
    _error: Any
    _fields: tuple[str, int, int, tuple[int, int]] | None
    _label: Any

    _notify: DeliveryObserver | None = None
    """Hears of failures (see :data:`DeliveryObserver`); producers set it on a subclass."""
    _explain: Callable[[DeliveryError], DeliveryError] | None = None
    """Makes a timed-out delivery's error say more (e.g. that the topic does not exist)."""
    _lead: Lead | None = None
    """Lets a waiter serve its client's reports itself (see :mod:`conveyor.driver.poller`)."""
    _clarify: Clarify | None = None
    """Asks, off the thread that serves the report, whether a timed-out delivery's topic
    exists: such a handle completes once that is answered (see :mod:`conveyor.driver.explainer`)."""

    @classmethod
    def bound_to(
        cls,
        notify: DeliveryObserver | None,
        explain: Callable[[DeliveryError], DeliveryError] | None = None,
        lead: Lead | None = None,
        clarify: Clarify | None = None,
    ) -> type[DeliveryHandle]:
        """A subclass whose handles report failures (and, for acknowledgements, every delivery)
        to ``notify``."""
        namespace = {
            "__slots__": (),
            "_notify": notify,
            "_explain": explain,
            "_lead": lead,
            "_clarify": clarify,
        }
        return type(cls.__name__, (cls,), namespace)

    @property
    def label(self) -> Any:
        """What the caller attached to the message (``None`` when nothing)."""
        try:
            return self._label
        except AttributeError:
            return None

    def __call__(self, error: Any, message: Any) -> None:
        """librdkafka's delivery callback for this message (runs where reports are served: the
        poller thread, a waiter, an event loop). A timed-out one completes on the explainer's
        thread, once the cluster said whether its topic exists."""
        self._error = error
        if error is not None and self._clarify is not None and asks_the_cluster(error):
            self._clarify((message.topic(),), partial(self._clarified, message))
            return
        # The rest is _completed's, written out: a call more per report showed in throughput.
        self._fields = (message.topic(), message.partition(), message.offset(), message.timestamp())
        if _single_waiters:
            waiter = _single_waiters.get(self)
            if waiter is not None:
                waiter.release()
        if error is not None and self._notify is not None:
            _tell(self._notify, error, message, self.label)  # failures are always reported
        if _awaits:
            awaiting = _awaits.pop(self, None)
            if awaiting is not None:
                settle(awaiting)
        if _done_callbacks:
            with _callbacks_lock:
                callbacks = _done_callbacks.pop(self, None)
            if callbacks:
                for callback in callbacks:
                    _call_back(callback, self)

    def _clarified(self, message: Any, verdicts: Verdicts) -> None:
        """A timed-out delivery, once the cluster said whether its topic exists."""
        missing = verdicts.get(message.topic())
        error = self._error
        self._error = Clarified(error, missing)
        self._fields = (message.topic(), message.partition(), message.offset(), message.timestamp())
        self._completed(error, message, missing)

    def _completed(self, error: Any, message: Any, missing: bool | None) -> None:
        """The report is in: wake whoever waits for it, and tell the observer of a failure."""
        if _single_waiters:
            waiter = _single_waiters.get(self)
            if waiter is not None:
                waiter.release()
        if error is not None and self._notify is not None:
            _tell(self._notify, error, message, self.label, missing)  # failures: always
        if _awaits:
            awaiting = _awaits.pop(self, None)
            if awaiting is not None:
                settle(awaiting)
        if _done_callbacks:
            with _callbacks_lock:
                callbacks = _done_callbacks.pop(self, None)
            if callbacks:
                for callback in callbacks:
                    _call_back(callback, self)

    def add_done_callback(self, callback: Callable[[DeliveryHandle], None]) -> None:
        """Call ``callback(handle)`` once the delivery is reported (delivered or failed), on the
        thread that serves the report (a timed-out one's: the producer's explainer thread, see
        :mod:`conveyor.driver.explainer`); at once, on this thread, if it is in already.

        Keep it short: it runs where delivery reports are served. An exception it raises is
        logged, not raised."""
        with _callbacks_lock:
            if not self.done():
                _done_callbacks.setdefault(self, []).append(callback)
                registered = True
            else:
                registered = False
        if not registered:
            _call_back(callback, self)
            return
        # The report may have come between the check and the registration, its callback
        # looking for registrations (without the lock) before this one was there: it sets
        # the result first and looks second, so this look after registering sees the result
        # whenever that one saw nothing. The pop decides who calls back: exactly one of us.
        if self.done():
            with _callbacks_lock:
                callbacks = _done_callbacks.pop(self, None)
            for late in callbacks or ():
                _call_back(late, self)

    def done(self) -> bool:
        """Whether the report (or the failure) is in."""
        try:
            # Producers set _fields to None when they make the handle (a waiter asks done()
            # in a loop, and an AttributeError per ask was measurable); the callback sets it.
            return self._fields is not None
        except AttributeError:
            return False

    def __await__(self) -> Generator[Any, None, DeliveryReport]:
        """``await handle``: the :class:`DeliveryReport`, or the delivery's error raised.

        The coroutine is woken through its event loop when the report is served; cancelling
        the await does not cancel the delivery (the message goes on, and nothing of the await
        is left behind once it is reported)."""
        if not self.done():
            future = asyncio.get_running_loop().create_future()
            if _awaits.setdefault(self, future) is not future:  # awaited twice at once
                self.add_done_callback(lambda _handle: settle(future))
            # The callback sets the result first and looks for awaits second; this looks at
            # the result after registering: one of the two sees the other. Whoever pops the
            # entry settles the future (settling it late, unawaited, is harmless).
            elif self.done():
                popped = _awaits.pop(self, None)
                if popped is future:
                    future.set_result(None)
                elif popped is not None:  # another thread's await came between: wake it
                    settle(popped)
            yield from future.__await__()
        return self.result()

    def wait(self, timeout: float | None = None) -> DeliveryReport:
        """Block until the delivery is reported; ``timeout`` in seconds (``None``: no limit).

        Raises:
            DeliveryError: the message was not delivered.
            WaitTimeoutError: no report within ``timeout`` (the message may still be delivered).
        """
        if not self.done():
            self._block(timeout)
        return self.result()

    def _block(self, timeout: float | None) -> None:
        lead = self._lead
        if lead is not None:
            deadline = time.monotonic() + (timeout if timeout is not None else _FOREVER)
            if lead(self.done, deadline):
                if self.done():
                    return
                raise WaitTimeoutError(
                    f"no delivery report within {timeout:.3f} s; the message may still be delivered"
                )
        with _waiter_creation:
            waiter = _single_waiters.get(self)
            if waiter is None:
                waiter = threading.Lock()
                waiter.acquire()
                _single_waiters[self] = waiter
        try:
            # Registered before this check: the callback either sees the waiter (and releases
            # it) or ran before the registration (and this check sees its result).
            if self.done():
                return
            if waiter.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
                waiter.release()  # let any other waiter of this handle through too
                return
            if not self.done():
                raise WaitTimeoutError(
                    f"no delivery report within {timeout:.3f} s; the message may still be delivered"
                )
        finally:
            if self.done():
                _single_waiters.pop(self, None)

    def result(self) -> DeliveryReport:
        """The report, or the delivery's error raised; :class:`WaitTimeoutError` if not done yet."""
        if not self.done():
            raise WaitTimeoutError("the delivery has not been reported yet")
        if self._error is not None:
            raise self._failure()
        fields = self._fields
        assert fields is not None
        topic, partition, offset, (kind, timestamp) = fields
        return DeliveryReport(topic, partition, offset, timestamp if kind else None, self.label)

    def error(self) -> DeliveryError | None:
        """The delivery's error, or ``None`` when delivered (or not reported yet)."""
        if not self.done() or self._error is None:
            return None
        return self._failure()

    def _failure(self) -> DeliveryError:
        fields = self._fields
        assert fields is not None
        topic, partition = fields[0], fields[1]
        error, missing = self._error, None
        if type(error) is Clarified:
            error, missing = error.error, error.missing
        failure = delivery_error(error, topic, partition, self.label, missing)
        if failure.name in EXPLAINED and self._explain is not None:
            failure = self._explain(failure)
        return failure

    def __repr__(self) -> str:
        state = (
            "pending" if not self.done() else ("failed" if self._error is not None else "delivered")
        )
        return f"<DeliveryHandle {state} label={self.label!r}>"


class AcknowledgedHandle(DeliveryHandle):
    """A :class:`DeliveryHandle` whose ``notify`` hears of every delivery, not only failures
    (used while someone listens to acknowledgements)."""

    __slots__ = ()

    def __call__(self, error: Any, message: Any) -> None:
        DeliveryHandle.__call__(self, error, message)
        if error is None and self._notify is not None:
            _tell(self._notify, error, message, self.label)


class BatchDeliveryHandle(_Waitable):
    """The delivery of a burst of messages (what ``produce_many_async`` returns).

    One handle serves the whole burst, and its delivery callback is one function shared
    by every unlabeled message, so the burst allocates and keeps nothing per message
    unless asked to: ``wait()`` returns the reports of the labeled messages, or of every
    message when the burst was produced with ``reports=True``, in the order the broker
    acknowledged them (per partition, the order they were produced in).
    """

    __slots__ = (
        "_asking",
        "_clarify",
        "_counter",
        "_errors",
        "_every",
        "_explain",
        "_notify",
        "_reports",
        "_verdicts",
        "count",
        "keep_reports",
    )

    def __init__(
        self,
        count: int,
        notify: DeliveryObserver | None = None,
        *,
        every: bool = False,
        keep_reports: bool = False,
        explain: Callable[[DeliveryError], DeliveryError] | None = None,
        lead: Lead | None = None,
        clarify: Clarify | None = None,
    ) -> None:
        self._state = _PENDING
        self._waiter = None
        self._lead = lead
        self._settle = None
        self._explain = explain
        self._clarify = clarify
        self._verdicts: Verdicts | None = None  # whether timed-out deliveries' topics exist
        self._asking = False
        self.count = count
        self.keep_reports = keep_reports
        self._counter = itertools.count(1)  # next() is atomic: callbacks may run on two threads
        self._reports: list[tuple[int, Any, Any]] = []
        self._errors: list[tuple[Any, Any, Any]] = []
        self._notify = notify
        self._every = every  # notify of every delivery, not only failures
        if count == 0:
            self._state = _DONE

    def shared_callback(self) -> Callable[[Any, Any], None]:
        """The delivery callback of every unlabeled message, doing as little as possible:
        closure variables are cheaper to reach than attributes, and keeping the message
        objects alive would cost the garbage collector more than everything else here.

        Made once per burst by the producer and never kept on the handle: the callback holds
        the handle, and a handle holding its callback would be a reference cycle, freed only by
        the garbage collector's rare full collections (the soak saw thousands wait there)."""
        advance = self._counter.__next__
        observe = self._observe
        complete = self._complete
        keep = self.keep_reports or self._every
        record = self._record

        def on_delivery(error: Any, message: Any) -> None:
            if keep:
                record(error, message, None)
                return
            position = advance()
            if error is not None:
                observe(error, message, None)
            if position >= self.count:
                complete()

        return on_delivery

    def labeled(self, label: Any) -> Callable[[Any, Any], None]:
        """A delivery callback for one message that carries ``label`` into its report."""

        def on_delivery(error: Any, message: Any) -> None:
            self._record(error, message, label)

        return on_delivery

    def _record(self, error: Any, message: Any, label: Any) -> None:
        position = next(self._counter)
        if error is None:
            self._reports.append((position, message, label))
        if error is not None or self._every:
            self._observe(error, message, label)
        if position >= self.count:
            self._complete()

    def _observe(self, error: Any, message: Any, label: Any) -> None:
        if error is not None:
            self._errors.append((error, message, label))
            if self._clarify is not None and asks_the_cluster(error):
                return  # told once the cluster said whether its topic exists (_clarified)
        if self._notify is not None:
            _tell(self._notify, error, message, label)

    def _complete(self) -> None:
        """Every message is reported: done, once the cluster said whether the topics of the
        timed-out ones exist (asked off this thread, as a :class:`DeliveryHandle` does)."""
        if self._asking:
            return  # _clarified completes it
        if self._verdicts is None and self._clarify is not None:
            topics = {m.topic() for error, m, _ in self._errors if asks_the_cluster(error)}
            if topics:
                self._asking = True
                self._clarify(topics, self._clarified)
                return
        _Waitable._complete(self)

    def _clarified(self, verdicts: Verdicts) -> None:
        self._verdicts = verdicts
        if self._notify is not None:
            for error, message, label in self._errors:
                if asks_the_cluster(error):
                    _tell(self._notify, error, message, label, verdicts.get(message.topic()))
        self._asking = False
        _Waitable._complete(self)

    def truncate(self, sent: int) -> None:
        """Shrink the burst to its first ``sent`` messages: a later one never reached librdkafka."""
        self.count = sent
        # Peek at the counter without consuming a number: its repr is "count(N)".
        delivered = int(repr(self._counter)[6:-1]) - 1
        if delivered >= sent:
            self._complete()

    def __await__(self) -> Generator[Any, None, list[DeliveryReport]]:
        """``await burst``: the kept reports (see :meth:`wait`), or :class:`BatchDeliveryError`;
        woken through the event loop once every message is reported."""
        yield from self._until_done()
        return self.result()

    def wait(self, timeout: float | None = None) -> list[DeliveryReport]:
        """Block until every message is reported; return the kept reports (see the class).

        Raises:
            BatchDeliveryError: some messages were not delivered (``failures`` has each error).
            WaitTimeoutError: not every report came within ``timeout`` seconds.
        """
        self._block(timeout)
        return self.result()

    def result(self) -> list[DeliveryReport]:
        """The kept reports, or :class:`BatchDeliveryError`; :class:`WaitTimeoutError` if not done yet."""
        if self._state != _DONE:
            raise WaitTimeoutError("not every delivery has been reported yet")
        if self._errors:
            verdicts = self._verdicts or {}
            failures = [
                delivery_error(
                    error,
                    message.topic(),
                    message.partition(),
                    label,
                    verdicts.get(message.topic()),
                )
                for error, message, label in self._errors
            ]
            if self._explain is not None:
                failures = [self._explain(f) if f.name in EXPLAINED else f for f in failures]
            raise BatchDeliveryError(
                f"{len(failures)} of {self.count} messages were not delivered; the first: {failures[0]}",
                failures,
                delivered=self.count - len(failures),
            )
        return [_report(message, label) for _, message, label in sorted(self._reports, key=_first)]


def _first(item: tuple[int, Any, Any]) -> int:
    return item[0]


class FutureHandle(Generic[T]):
    """A handle over a ``concurrent.futures.Future`` (admin operations), with the same shape:
    ``wait(timeout)``, ``done()``, ``result()``; librdkafka errors come out as Conveyor's."""

    __slots__ = ("_future", "_refused", "_what")

    def __init__(
        self,
        future: concurrent.futures.Future[T],
        what: str,
        refused: Callable[[], KafkaError | None] | None = None,
    ) -> None:
        self._future = future
        self._what = what
        self._refused = refused
        """Says (serving the client's events) whether Kafka refused the client's credentials:
        then waiting is over at once."""

    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout: float | None = None) -> T:
        """Block until the operation finishes (woken by the future, no polling).

        Raises:
            KafkaError: the operation failed.
            WaitTimeoutError: it did not finish within ``timeout`` seconds.
        """
        started = time.monotonic()
        try:
            if self._refused is None:
                return self._future.result(timeout)
            return self._result_unless_refused(self._refused, started, timeout)
        except concurrent.futures.TimeoutError:
            raise WaitTimeoutError(
                f"{self._what} did not finish within {time.monotonic() - started:.3f} s"
            ) from None
        except KafkaError:
            raise
        except Exception as exc:
            raise to_conveyor_error(exc, KafkaError, context=f"{self._what} failed: ") from exc

    def _result_unless_refused(
        self, refused: Callable[[], KafkaError | None], started: float, timeout: float | None
    ) -> T:
        # A refusal is an event the client serves only when asked: ask every second.
        deadline = None if timeout is None else started + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return self._future.result(1.0 if left is None else min(1.0, left))
            except concurrent.futures.TimeoutError:
                failure = refused()
                if failure is not None:
                    raise failure from None
                if left is not None and left <= 1.0:
                    raise

    def result(self) -> T:
        """The result if done; :class:`WaitTimeoutError` otherwise."""
        if not self._future.done():
            raise WaitTimeoutError(f"{self._what} has not finished yet")
        return self.wait(0)
