"""``ListenerThread``: which thread is a listener's, and the work other threads hand it.

Only the listener's thread touches librdkafka's consumer. Other threads queue *commands*
(:meth:`ListenerThread.command`; :meth:`~ListenerThread.call` waits for a result) that run
between polls (:meth:`~ListenerThread.run_commands`); one queued from another thread ends the
poll's wait.

A quick partition's batch may run on the listener's thread itself (:meth:`~ListenerThread.run_here`,
see the executor). One that runs :data:`TAKE_OVER_AFTER` hands the listener's role (polling,
hand-offs, commits) to a new thread: a slow batch must not cost the group membership
(``max.poll.interval.ms``) nor hold up the others. The old thread ends when its batch returns
(:class:`HandedOver` unwinds it out of the listener's loop).
"""

from __future__ import annotations

import concurrent.futures
import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.errors import KafkaError
from conveyor.processing.partition_core import PartitionCore

if TYPE_CHECKING:
    from conveyor.processing.timers import Timers

__all__ = ["TAKE_OVER_AFTER", "HandedOver", "ListenerThread"]

_log = logging.getLogger("conveyor.processing")

TAKE_OVER_AFTER = 0.5
"""Seconds a batch may run on the listener's thread before another thread takes its role."""


class HandedOver(Exception):
    """Ends a listener thread whose role another thread took while it ran a batch."""


class ListenerThread:
    """The thread that holds a listener's role, its commands, and the role's hand-over (see
    the module). ``loop`` is what each thread that holds the role runs."""

    def __init__(
        self,
        name: str,
        loop: Callable[[], None],
        *,
        wake: Callable[[], None],
        report: Callable[[KafkaError], None],
        timers: Timers,
        stopping: threading.Event,
        call_wait: float,
        run_counted: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self._name = name
        self._loop = loop
        self._wake = wake  # ends the poll's wait
        self._report = report
        self._timers = timers
        self._stopping = stopping
        self._call_wait = call_wait
        self._run_counted = run_counted or operator.call  # a job, counted as the pool's work
        self.current = self._new_thread()
        """The thread that holds the listener's role now."""
        self.commands: deque[Callable[[], None]] = deque()
        """Actions queued for the listener's thread (see :meth:`command`)."""
        self._role = threading.Lock()  # who is the listener's thread, and its inline job
        self._inline_since: float | None = None
        self._inline_job: Callable[[], None] | None = None

    def _new_thread(self) -> threading.Thread:
        return threading.Thread(
            target=self._loop, name=f"conveyor-listener-{self._name}", daemon=True
        )

    def start(self, take_over: bool) -> None:
        """Start the thread; ``take_over``: watch the batches it runs itself (see the module)."""
        self.current.start()
        if take_over:
            self._timers.call_later(TAKE_OVER_AFTER / 2, self._watch)

    def join(self, timeout: float) -> None:
        """Wait for the thread that holds the role now."""
        self.current.join(timeout)

    # -- commands -----------------------------------------------------------------------------

    def command(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the listener thread before it hands out the next fetched messages;
        from another thread, its poll's wait ends for it."""
        self.commands.append(action)
        if threading.current_thread() is not self.current:
            self._wake()

    def call(self, action: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``action`` on the listener thread and wait for its result (woken by a Future).

        Returns ``None`` when the listener does not get to it in time (stopped or stuck).

        On the listener's own thread the action runs at once. A batch on that thread that
        outlives ``TAKE_OVER_AFTER`` has a successor polling beside it: an action it started
        before the hand-over finishes beside the successor's loop, so such actions must only
        make librdkafka calls (commit, group metadata), never change the listener's state."""
        if threading.current_thread() is self.current:
            return action()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(action())
            except Exception as exc:
                future.set_exception(exc)

        self.command(run)
        wait = timeout if timeout is not None else self._call_wait
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            return None

    def run_commands(self) -> None:
        """On the listener's thread: run the queued commands, in order; one that raises is
        reported, and the others run."""
        commands = self.commands
        while commands:
            action = commands.popleft()
            try:
                action()
            except Exception as exc:
                self._report(KafkaError(f"listener command failed: {exc}"))

    # -- batches on the listener's thread -----------------------------------------------------

    def run_here(self, job: Callable[[], None]) -> None:
        """Run a job on this thread (a quick batch), counted as the pool's work. If the job ran
        so long that another thread took over the listener's role meanwhile, this thread ends
        when it returns (:class:`HandedOver` unwinds it out of the loop)."""
        self._inline_job = job
        self._inline_since = time.monotonic()
        try:
            self._run_counted(job)
        finally:
            with self._role:
                handed = self.current is not threading.current_thread()
                if not handed:  # after a hand-over the record is the successor's
                    self._inline_since = None
                    self._inline_job = None
        if handed:
            raise HandedOver

    def _watch(self) -> None:
        """On the timers' thread, a few times a second: a batch that has run on the listener's
        thread for ``TAKE_OVER_AFTER`` gets a new listener thread beside it."""
        if self._stopping.is_set():
            return
        successor = None
        held = 0.0  # seconds the batch has run
        with self._role:
            since, job = self._inline_since, self._inline_job
            if since is not None and (held := time.monotonic() - since) >= TAKE_OVER_AFTER:
                self._inline_since = None  # one successor per blocked batch
                successor = self.current = self._new_thread()
        if successor is not None:
            executor = getattr(getattr(job, "func", None), "__self__", None)
            where = (
                f"{executor.topic}/{executor.partition}"
                if isinstance(executor, PartitionCore)
                else "a partition"
            )
            _log.info(
                "%s: a batch of %s has run %.1f s on the listener's thread; another thread "
                "polls meanwhile",
                self._name,
                where,
                held,
            )
            successor.start()
        self._timers.call_later(TAKE_OVER_AFTER / 2, self._watch)
