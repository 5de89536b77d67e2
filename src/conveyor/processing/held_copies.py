"""``HeldCopies``: what a partition sent at least once and the broker has not acknowledged yet
(a dead letter, an at-least-once pipe, an RPC reply): nothing at or past the lowest such
offset is committed, and a failed copy is sent again after the back-off while the partition
is still this process's."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog

if TYPE_CHECKING:
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.instrumentation.monitor import Monitor
    from conveyor.processing.timers import Timers
    from conveyor.producer import Producer

__all__ = ["HeldCopies"]

_log = logging.getLogger("conveyor.processing")
_copy_failed = RateLimitedLog(_log)


class HeldCopies:
    """The copies of one partition in flight, by offset.

    Shares its partition's lock (``lock``): ``gone()``, called with it held, says whether the
    partition was revoked or stopped (a failed copy is then left unsent, its offset
    uncommitted, so the message is read again rather than lost)."""

    def __init__(
        self,
        lock: threading.Lock,
        topic: str,
        partition: int,
        gone: Callable[[], bool],
        delay: Callable[[int], float],
        timers: Timers,
        monitor: Monitor,
    ) -> None:
        self._lock = lock
        self._topic = topic
        self._partition = partition
        self._gone = gone
        self._delay = delay
        self._timers = timers
        self._monitor = monitor
        self._fenced: dict[int, int] = {}  # offset -> copies of it not acknowledged yet
        self._in_flight = 0
        self._acknowledged = threading.Condition(lock)

    def send(self, offset: int, message: dict[str, Any], producer: Producer) -> DeliveryHandle:
        """Send ``message`` (a produce dict) without waiting; nothing at or past ``offset`` is
        committed until the broker acknowledged it. Only commits wait for the report, so the
        producer's poller is not hurried for it."""
        resend = partial(producer.produce_unhurried, message)
        handle = resend()
        with self._lock:
            self._fenced[offset] = self._fenced.get(offset, 0) + 1
            self._in_flight += 1
        handle.add_done_callback(lambda done: self._reported(offset, done, resend, attempt=1))
        return handle

    def fence(self, offset: int | None) -> int | None:
        """``offset``, or the lowest offset whose copy is not acknowledged yet, if lower."""
        if offset is None or not self._fenced:
            return offset
        with self._lock:
            lowest = min(self._fenced, default=offset)
        return min(offset, lowest)

    def wait(self, deadline: float) -> bool:
        """Block until no copy awaits its acknowledgement (or the monotonic ``deadline``);
        True when none does."""
        with self._acknowledged:
            return self._acknowledged.wait_for(
                lambda: self._in_flight == 0, timeout=max(0.0, deadline - time.monotonic())
            )

    def _reported(
        self,
        offset: int,
        handle: DeliveryHandle,
        resend: Callable[[], DeliveryHandle],
        attempt: int,
    ) -> None:
        """A copy's delivery report (on the thread that serves reports)."""
        failure = handle.error()
        with self._lock:
            self._in_flight -= 1
            if failure is None:
                left = self._fenced[offset] - 1
                if left:
                    self._fenced[offset] = left
                else:
                    del self._fenced[offset]
            again = failure is not None and not self._gone()
            self._acknowledged.notify_all()
        if failure is None:
            return
        self._not_sent(offset, failure, resend, attempt, again)

    def _not_sent(
        self,
        offset: int,
        failure: BaseException,
        resend: Callable[[], DeliveryHandle],
        attempt: int,
        again: bool,
    ) -> None:
        """Copy ``attempt`` failed (reported, or refused at once): tell, and send it again after
        the back-off when ``again``."""
        delay = self._delay(attempt)
        topic, partition = self._topic, self._partition
        _copy_failed.log(
            logging.ERROR,
            f"{topic}/{partition}",
            "%s/%s: the copy of offset %s was not delivered (%s); %s",
            topic,
            partition,
            offset,
            failure,
            f"sending it again in {delay:.1f} s" if again else "its offset stays uncommitted",
        )
        if ev.ERROR_OCCURRED in self._monitor.subscribed:
            self._monitor.instrument(
                ev.ERROR_OCCURRED,
                type="consumer.copy.error",
                error=failure,
                topic=topic,
                partition=partition,
                offset=offset,
                attempt=attempt,
            )
        if again:
            self._timers.call_later(delay, lambda: self._send_again(offset, resend, attempt + 1))

    def _send_again(self, offset: int, resend: Callable[[], DeliveryHandle], attempt: int) -> None:
        with self._lock:
            if self._gone():
                return
            self._in_flight += 1
        try:
            handle = resend()
        except Exception as exc:
            with self._lock:
                self._in_flight -= 1
                self._acknowledged.notify_all()
            self._not_sent(offset, exc, resend, attempt, again=True)
            return
        handle.add_done_callback(lambda done: self._reported(offset, done, resend, attempt))
