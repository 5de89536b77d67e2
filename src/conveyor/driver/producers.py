"""The librdkafka producer, behind a facade that speaks Conveyor's types.

:class:`ProducerClient` owns one librdkafka producer and the poller thread that serves its
callbacks, and every call the producer part makes of it: produce, flush, purge, metadata,
the transaction calls. Errors leave it as Conveyor's exceptions. ``produce`` is librdkafka's
own bound method, called with positional arguments: it is the hot path, and a wrapper
around it measured as a throughput loss.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from conveyor.driver.clients import create_producer
from conveyor.driver.connection import ConnectionNews, ConnectionWatch
from conveyor.driver.consumers import offset_with_metadata
from conveyor.driver.credentials import refusal
from conveyor.driver.errors import ErrorCode, is_error, to_conveyor_error
from conveyor.driver.explainer import EXPLAIN_TIMEOUT, Clarify, Explainer
from conveyor.driver.handles import AcknowledgedHandle, DeliveryHandle
from conveyor.driver.loop_serving import LoopServing, loop_serving
from conveyor.driver.poller import Poller
from conveyor.errors import (
    AuthenticationError,
    DeliveryError,
    InvalidMessageError,
    KafkaError,
    TransactionError,
)

__all__ = ["EXPLAIN_TIMEOUT", "PURGED", "ProducerClient"]

PURGED = frozenset({int(ErrorCode._PURGE_QUEUE), int(ErrorCode._PURGE_INFLIGHT)})
"""Error codes of messages purged before delivery (an abort, a close)."""

_METADATA_TIMEOUT = 10.0
_log = logging.getLogger("conveyor.driver")

_SEND_OFFSETS_GRACE = 5.0
"""Seconds past its own timeout that a ``send_offsets_to_transaction`` may take before the
client is given up (librdkafka answers within its timeout when it answers at all)."""
# How long, at most, a client abandoned in a hung send_offsets_to_transaction is nudged.
_UNSTICK_FOR = 600.0
_UNSTICK_EVERY = 5.0
_EXPLAINED_FOR = 1.0
"""Seconds that check's answer about a topic serves later timed-out deliveries to it: a burst's
thousand failures are explained with one request, not a thousand (or, with no broker to
answer, in 0.3 s rather than 300)."""


class _ClosedProducer:
    """What a closed client calls instead of librdkafka's producer: nothing is queued, nothing
    is served, and anything sent fails."""

    def __len__(self) -> int:
        return 0

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float = 0.0) -> int:
        return 0

    def purge(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        def closed(*args: Any, **kwargs: Any) -> Any:
            raise KafkaError(f"the producer's client is closed ({name} refused)")

        return closed


_CLOSED = _ClosedProducer()


class ProducerClient:
    """One librdkafka producer and its poller thread.

    Args:
        config: librdkafka settings.
        name: the poller thread's name.
        on_error: non-fatal client errors (fatal ones mark the client, see :attr:`fatal`).
        on_fatal: called once when the client hits a fatal error.
        on_served: called after each poll that served callbacks (wakes room waiters).
        on_callback_error: an exception raised by a callback Conveyor or the user set.
        on_statistics: librdkafka's statistics JSON (with ``statistics.interval.ms``).
        on_connection: the connection was lost, is still lost, or is back (told once, not per
            failed reconnect; lost-connection errors do not reach ``on_error``).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        name: str,
        *,
        on_error: Callable[[KafkaError], None],
        on_fatal: Callable[[KafkaError], None],
        on_served: Callable[[], None] | None = None,
        on_callback_error: Callable[[BaseException], None] | None = None,
        on_statistics: Callable[[str], None] | None = None,
        on_connection: Callable[[ConnectionNews], None] | None = None,
    ) -> None:
        self._on_error = on_error
        self._config = config
        self.credentials_refused: AuthenticationError | None = None
        """Set when Kafka refused this client's credentials: what was queued has failed, and
        nothing more is accepted (see :mod:`conveyor.driver.credentials`)."""
        self._watch = (
            ConnectionWatch(str(config.get("client.id", name)), on_connection)
            if on_connection is not None
            else None
        )
        self._on_fatal = on_fatal
        self._on_callback_error = on_callback_error
        self._kafka = create_producer(
            config,
            on_error=self._error,
            on_statistics=on_statistics if "statistics.interval.ms" in config else None,
        )
        self.produce: Callable[..., None] = self._kafka.produce
        """librdkafka's produce: ``(topic, value, key, partition, on_delivery, None, timestamp,
        headers)``, positional (keyword arguments cost confluent-kafka a dict per call). Raises
        ``BufferError`` when the local queue is full; see :meth:`refused` for other errors."""
        self.fatal: KafkaError | None = None
        self._fatal_lock = threading.Lock()
        self._partition_counts: dict[str, int] = {}
        self._topics_missing: dict[str, tuple[float, bool]] = {}
        self._unanswered_at = -math.inf  # when the cluster last gave no answer (never yet)
        self.explainer = Explainer(self.topic_missing, name)
        """Asks whether the topics of timed-out deliveries exist, off the serving thread."""
        self.clarify: Clarify | None = self.explainer.explain
        """How this client's handles ask whether a timed-out delivery's topic exists."""
        self.poller = Poller(
            self._kafka,
            name,
            on_served=on_served,
            on_crash=self._callback_raised,
            on_idle=self._check_connection if self._watch is not None else None,
            idle=self._nothing_in_flight,
        )
        self.loop_serving: LoopServing | None = loop_serving(
            self._kafka, config, self.poller.serve_here
        )
        """Lets an event loop serve this client's reports itself (None when it cannot)."""
        if self.loop_serving is not None:
            self.poller.loop_serves = self.loop_serving.serving
        self.lead = self.poller.lead
        """Serve this client's callbacks in the calling thread while waiting for a result, when
        its poller is parked (see :mod:`conveyor.driver.poller`); False when it cannot."""
        self.plain_handle: type[DeliveryHandle] = DeliveryHandle
        """The handle class of this client's messages (the producer binds its observers)."""
        self.acknowledged_handle: type[DeliveryHandle] = AcknowledgedHandle

    def serve(self, timeout: float) -> int:
        """Serve queued callbacks (delivery reports ...) in the calling thread, waiting up to
        ``timeout`` seconds; returns how many were served. The poller then stays out of the
        queue for a moment (see :mod:`conveyor.driver.poller`)."""
        served = int(self._kafka.poll(timeout))
        self.poller.note_served()
        return served

    def handed_over(self) -> None:
        """Work was handed to librdkafka: see that its reports get served. The running event
        loop serves them when it serves this client (the poller stays out meanwhile); else a
        poller parked for lack of work goes back to polling."""
        serving = self.loop_serving
        if serving is not None and serving.serves_running_loop():
            self.poller.served_at = time.monotonic()
        elif self.poller.parked:
            self.poller.wake()

    def _nothing_in_flight(self) -> bool:
        # librdkafka's out-queue: messages queued or in flight, and reports not served yet.
        return len(self._kafka) == 0

    # -- errors -------------------------------------------------------------------------------

    def _error(self, error: Any) -> None:
        failure = to_conveyor_error(error, KafkaError, context="librdkafka: ")
        refused = refusal(failure, self._config, "producer")
        if refused is not None:
            if self.credentials_refused is None:  # told once; librdkafka would go on trying
                self._refuse(refused)
                self._on_error(refused)
            return
        if failure.fatal:
            self.mark_fatal(failure)
            return
        if self._watch is not None and self._watch.error(failure):
            return  # a lost connection is told once by the watch, not per reconnect
        self._on_error(failure)

    def _refuse(self, refused: AuthenticationError) -> None:
        """Fail what is queued (its handles report at once) and every later message."""
        self.credentials_refused = refused

        def refuse(*_args: Any) -> None:
            raise refused

        self.produce = refuse
        self._purge()
        # A produce() already past its check when the refusal came is purged a moment later.
        again = threading.Timer(1.0, self._purge)
        again.daemon = True
        again.start()

    def _purge(self) -> None:
        with contextlib.suppress(Exception):  # a client closed meanwhile has nothing to purge
            self._kafka.purge(in_queue=True, in_flight=True, blocking=False)

    def _check_connection(self) -> None:
        """On the poller's thread, between polls: while down, ask for metadata now and then."""
        watch = self._watch
        if watch is None or not watch.probe_due():
            return
        try:
            self._kafka.list_topics(timeout=1.0)
        except Exception:
            return
        watch.alive()

    def _callback_raised(self, exc: BaseException) -> None:
        # confluent-kafka raises fatal errors out of poll() as well as reporting them.
        error: Any = exc.args[0] if exc.args else None
        if is_error(error) and error.fatal():
            self._error(error)
            return
        if self._on_callback_error is not None:
            self._on_callback_error(exc)

    def mark_fatal(self, failure: KafkaError) -> None:
        """The client can no longer be used: remember why and report it, once."""
        with self._fatal_lock:
            if self.fatal is not None:
                return
            self.fatal = failure
        self._on_fatal(failure)

    def refused(self, exc: Exception, topic: str) -> Exception:
        """The exception to raise for ``exc``, which ``produce`` raised for a message to
        ``topic``: :class:`InvalidMessageError` for a message too large, else a
        :class:`DeliveryError` with librdkafka's code and name (a fatal one marks the client);
        refused credentials as they were told."""
        if isinstance(exc, AuthenticationError):
            return exc
        failure = to_conveyor_error(
            exc, DeliveryError, context=f"librdkafka refused a message for {topic!r}: ", topic=topic
        )
        failure.persistence = "not_persisted"  # it never entered librdkafka's queue
        if failure.fatal:
            self.mark_fatal(failure)
        if failure.code == ErrorCode.MSG_SIZE_TOO_LARGE:
            return InvalidMessageError(str(failure), "payload")
        return failure

    # -- metadata and queue -------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has (asked once, then remembered).

        Raises:
            InvalidMessageError: the cluster does not know the topic.
        """
        count = self._partition_counts.get(topic)
        if count is None:
            metadata = self._kafka.list_topics(topic, timeout=_METADATA_TIMEOUT).topics.get(topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                raise InvalidMessageError(
                    f"partition_key needs the partition count of {topic!r}, and the cluster does not "
                    f"know that topic ({metadata.error if metadata is not None else 'no metadata'})",
                    "partition_key",
                )
            count = self._partition_counts[topic] = len(metadata.partitions)
        return count

    def topic_missing(self, topic: str) -> bool:
        """Whether the cluster says ``topic`` does not exist: a delivery to it that timed out
        is explained so (librdkafka says it only after ``topic.metadata.propagation.max.ms``,
        30 s). Asked at most once in ``_EXPLAINED_FOR``, up to ``EXPLAIN_TIMEOUT``, on the
        :attr:`explainer`'s thread; no answer counts as not missing, for every topic alike."""
        now = time.monotonic()
        if now - self._unanswered_at < _EXPLAINED_FOR:
            return False
        asked = self._topics_missing.get(topic)
        if asked is not None and now - asked[0] < _EXPLAINED_FOR:
            return asked[1]
        try:
            metadata = self._kafka.list_topics(topic, timeout=EXPLAIN_TIMEOUT).topics.get(topic)
        except Exception:  # the cluster does not answer either: the message says so already
            self._unanswered_at = time.monotonic()
            return False
        missing = metadata is None or metadata.error is not None
        if topic not in self._topics_missing and len(self._topics_missing) >= 1024:
            self._topics_missing.clear()  # a bound, not a cache policy: answers age fast
        self._topics_missing[topic] = (time.monotonic(), missing)
        return missing

    def __len__(self) -> int:
        """Messages in librdkafka's queues, not yet acknowledged."""
        return len(self._kafka)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for the queue to empty, and for the handles of its
        timed-out deliveries to be explained; return how many are left."""
        deadline = time.monotonic() + timeout
        left = int(self._kafka.flush(timeout))
        self.explainer.wait_idle(deadline - time.monotonic())
        return left

    def close(self, timeout: float) -> int:
        """Flush, purge what is left (its handles fail), stop the poller and let librdkafka's
        producer go; return how many were purged."""
        remaining = self.flush(timeout) if timeout > 0 else len(self._kafka)
        if remaining:
            self._kafka.purge(in_queue=True, in_flight=True, blocking=False)
            self._kafka.flush(min(5.0, max(timeout, 1.0)))  # serves the purge reports
        self.explainer.close()  # what it still has to explain completes, unexplained
        if self.loop_serving is not None:
            self.loop_serving.close()  # gives librdkafka its queue back before it is destroyed
        if self.poller.stop():
            self._release()
        return remaining

    def _release(self) -> None:
        """Drop every reference to librdkafka's producer, so that it is destroyed (its threads
        and sockets gone) now: it and this client refer to each other (its callbacks), and
        such a cycle waits for the garbage collector's rare full collections. A producer
        replaced after a fatal error was found alive, threads and all, minutes later."""
        self._kafka = _CLOSED
        self.produce = _CLOSED.produce

    # -- transactions -------------------------------------------------------------------------

    def init_transactions(self, timeout: float) -> None:
        self._transactional("could not initialize transactions: ", "init_transactions", timeout)

    def begin_transaction(self) -> None:
        self._transactional("could not begin a transaction: ", "begin_transaction")

    def commit_transaction(self, timeout: float) -> None:
        self._transactional("could not commit the transaction: ", "commit_transaction", timeout)

    def abort_transaction(self, timeout: float) -> None:
        self._transactional("could not abort the transaction: ", "abort_transaction", timeout)

    def send_offsets(
        self,
        offsets: Iterable[tuple[str, int, int]],
        group_metadata: Any,
        timeout: float,
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        """Add consumer offsets ``(topic, partition, next offset)`` to the open transaction,
        each with its ``metadata`` string if given; ``group_metadata`` comes from the
        consumer's client."""
        given = metadata or {}
        partitions = [
            offset_with_metadata(topic, partition, offset, given.get((topic, partition)))
            for topic, partition, offset in offsets
        ]
        kafka = self._kafka
        context = "could not add the offsets to the transaction: "
        returned = threading.Event()
        raised: list[BaseException] = []

        def send() -> None:
            try:
                self._transactional(
                    context, "send_offsets_to_transaction", partitions, group_metadata, timeout
                )
            except BaseException as exc:  # raised in the caller's thread below
                raised.append(exc)
            finally:
                returned.set()

        # librdkafka may never return from this call, whatever its timeout, when the group's
        # coordinator went away (confluentinc/librdkafka#5456, #5511): it is made on a thread
        # of its own, so that a hung one costs this client (rebuilt) and not the worker, the
        # transaction lock and with them every transactional consumer of the process.
        threading.Thread(target=send, name="conveyor-send-offsets", daemon=True).start()
        # A slow call may be the lookup of a coordinator whose broker stopped, which librdkafka
        # retries only on a broker's state change (#5511): a metadata request every few seconds
        # brings the returned broker back in, and the call goes on instead of running out.
        deadline = time.monotonic() + timeout + _SEND_OFFSETS_GRACE
        while not returned.wait(max(0.0, min(_UNSTICK_EVERY, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                break
            with contextlib.suppress(Exception):
                kafka.list_topics(timeout=2.0)
        if not returned.is_set():
            _unstick(kafka, returned)
            failure = TransactionError(
                f"{context}librdkafka did not return within "
                f"{timeout + _SEND_OFFSETS_GRACE:g} s (its coordinator request hangs: "
                "confluentinc/librdkafka#5456); the transaction is abandoned and the producer "
                "rebuilt, which fences it",
                fatal=True,
            )
            self.mark_fatal(failure)
            raise failure
        if raised:
            raise raised[0]

    def _transactional(self, context: str, method: str, *args: Any) -> None:
        # The method is looked up here, not passed in bound: a bound method in this frame's
        # locals would keep librdkafka's producer alive for as long as any traceback through
        # this frame lives (an error kept for a report, a retry), long after the client closed.
        try:
            getattr(self._kafka, method)(*args)
        except Exception as exc:
            failure = to_conveyor_error(exc, TransactionError, context=context)
            if failure.fatal:  # fenced, or the coordinator gave up on us: rebuild before reuse
                self.mark_fatal(failure)
            raise failure from exc


def _unstick(kafka: Any, returned: threading.Event) -> None:
    """Nudge librdkafka's producer ``kafka``, abandoned in a hung
    ``send_offsets_to_transaction``, until the call returns (then the thread stuck in it ends
    and the producer, its threads and sockets with it, is freed).

    librdkafka retries the call's coordinator lookup only when one of its brokers changes
    state, and a broker that left the metadata (stopped) has no thread left to change state
    (confluentinc/librdkafka#5511): the call then waits until some other broker's state
    changes, possibly for good. A metadata request every few seconds brings a returned broker
    back into the client (a state change), which lets the lookup go on."""

    def nudge() -> None:
        started = time.monotonic()
        while not returned.wait(_UNSTICK_EVERY):
            if time.monotonic() - started > _UNSTICK_FOR:
                _log.warning(
                    "a send_offsets_to_transaction call is still hung in librdkafka after "
                    "%.0f s; its abandoned producer stays allocated (confluentinc/librdkafka#5511)",
                    time.monotonic() - started,
                )
                return
            with contextlib.suppress(Exception):
                kafka.list_topics(timeout=2.0)
        _log.info(
            "a hung send_offsets_to_transaction returned after %.0f s; its abandoned producer "
            "is freed",
            time.monotonic() - started,
        )

    threading.Thread(target=nudge, name="conveyor-unstick", daemon=True).start()
