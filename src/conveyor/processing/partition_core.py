"""What every executor of an assigned topic-partition shares, whether its messages run in
order on one consumer (:class:`~conveyor.processing.executor.PartitionExecutor`) or in
virtual partitions' lanes
(:class:`~conveyor.processing.virtual.executor.VirtualPartitionExecutor`): the partition's
state (pending messages, flags, marked offset, held copies), the listener's calls that do not
depend on how batches run (revoke, stop, back-pressure, commits and their fence), and what a
consumer and the failure policy ask of their partition (producers, dead letters, group
metadata, transactions).

How batches run is each executor's own: the members marked abstract below. The user's hooks
run through the partition's :class:`~conveyor.processing.hook_runs.HookRuns`
(``self.hooks``). The listener, the runner and the snapshot see only a ``PartitionCore``.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError, NotAssignedError
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.rate_limit import RateLimitedLog
from conveyor.processing.backlog import Backlog
from conveyor.processing.held_copies import HeldCopies
from conveyor.processing.hook_runs import HookRuns
from conveyor.processing.offset_metadata import OffsetMetadata
from conveyor.tracing.latency import PollTimes

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.driver.handles import DeliveryHandle
    from conveyor.messages import Message
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.joint_transaction import Seat
    from conveyor.processing.listener_actions import ListenerActions
    from conveyor.processing.snapshot import LaneState
    from conveyor.processing.strategies import FailurePolicy
    from conveyor.processing.timers import Timer, Timers
    from conveyor.producer import Producer
    from conveyor.routing.topic import Topic
    from conveyor.state.partition_stores import PartitionStores
    from conveyor.state.view import State
    from conveyor.tracing.tracer import Tracing

__all__ = ["PartitionCore", "RunningBatch"]

_copy_failed = RateLimitedLog(logging.getLogger("conveyor.processing"))


class RunningBatch:
    """The batch a worker runs now: its first message, its offsets and when it started (wall
    clock)."""

    __slots__ = ("count", "first", "first_offset", "last_offset", "started_at")

    def __init__(self, batch: list[Any]) -> None:
        self.first = batch[0]
        self.first_offset: int = batch[0].offset()
        self.last_offset: int = batch[-1].offset()
        self.count = len(batch)
        self.started_at = time.time()


class PartitionCore(ABC):
    """The state and the shared operations of one assigned topic-partition in one listener
    (see the module)."""

    def __init__(
        self,
        listener: ListenerActions,
        route: Topic,
        partition: int,
        context: ProcessingContext,
        policy: FailurePolicy,
        timers: Timers,
        topic: str | None = None,
        *,
        polls: PollTimes | None = None,
    ) -> None:
        self.listener = listener
        self.route = route
        self.topic = topic or route.name  # a pattern route serves topics of other names
        self.partition = partition
        self.context = context
        self.policy = policy
        self._timers = timers
        self.max_messages = route.max_messages or context.settings.max_messages
        self._high_water = max(self.max_messages * 10, 2_000)
        self._low_water = self._high_water // 4
        self.pending = Backlog()
        self.fed = 0  # runs of messages the listener handed over (its thread only)
        self.lock = threading.Lock()
        self.scheduled = False  # a job is queued or running
        self.revoked = False
        self.stopped = False
        self.held = False  # paused by the user, quieted, or waiting out an error
        self.backpressure = False  # fetching paused in librdkafka while too much is pending
        self.eof = False
        self.marked: int | None = None  # the next offset to read, as last marked
        self.metadata = OffsetMetadata()
        """The metadata that marks gave, and that commits carry."""
        self.transactional = False  # offsets committed by consume-transform-produce transactions
        self.high_watermark: int | None = None  # as of the latest fetch
        self.first_fetched: int | None = None  # where this process started reading
        self.attempt = 0  # failed attempts of the current batch so far
        self._marked_at_failure = -1
        self.consumer: Consumer | None = None
        # Set when this partition was revoked while a batch ran and then assigned again: the
        # new executor starts only once this one's last batch is over (order per partition).
        self.successor: PartitionCore | None = None
        self.predecessor: PartitionCore | None = None
        self._resume_timer: Timer | None = None
        self.copies = HeldCopies(
            self.lock,
            self.topic,
            partition,
            lambda: self.revoked or self.stopped,
            policy.backoff.delay,
            timers,
            context.monitor,
        )
        """Copies sent at least once (dead letters, pipes, replies) not acknowledged yet."""
        self.polls = polls if polls is not None else PollTimes()
        """When each fetch came, while latency is measured."""
        self.hooks = HookRuns(self)
        """Runs ``consume()`` and the other hooks on this partition's consumers."""
        space = context.stores
        self.stores: PartitionStores | None = (
            space.for_partition(route, self.topic, partition, self._gone)
            if space is not None and route.state
            else None
        )
        """The route's state stores of this partition (opened before its first batch)."""
        joint = context.joint_transaction
        self.joint_seat: Seat | None = None if joint is None else joint.seat(self)
        """Its way into the app's joint transaction (``transaction_interval``), or ``None``."""
        self.rewound = False  # its running batch was rewound with a joint transaction: not failed
        self._rewind_asked = False  # an aborted joint transaction left it a rewind to run
        self._rebuild_asked: list[str] | None = None  # stores to rebuild from their changelogs

    # -- how batches run: each executor's own -------------------------------------------------

    @abstractmethod
    def add(self, raws: list[Any], high_watermark: int | None, alone: bool = False) -> None:
        """Messages fetched for this partition, in order, and the partition's high watermark
        (``alone``: they are all the listener's poll brought)."""

    @abstractmethod
    def reached_eof(self) -> None:
        """The listener read to the end of the partition."""

    @abstractmethod
    def run(self) -> None:
        """The job the listener submits: run what is pending."""

    @abstractmethod
    def tick(self) -> None:
        """Run the consumers' ``tick()`` if the partition is idle."""

    @abstractmethod
    def _dropped(self, seek: bool) -> None:
        """With the lock held, in the same section that cleared ``pending``: drop what else
        holds fetched messages; ``seek``: they will be read again."""

    @abstractmethod
    def adopt_kept(self) -> int | None:
        """Its first block in a joint transaction takes over the store writes kept for its
        own flush; the first offset of their batches (``None``: none wait)."""

    @abstractmethod
    def running_batches(self) -> list[tuple[int | None, RunningBatch]]:
        """The batches running now, each with its lane (``None`` without virtual partitions)."""

    @abstractmethod
    def lane_states(self) -> list[LaneState]:
        """Its virtual partitions now (none without them)."""

    @property
    @abstractmethod
    def collapsed(self) -> bool:
        """Whether its virtual partitions run in one lane after a failure."""

    @abstractmethod
    def first_waiting(self) -> Any | None:
        """The first message fetched and not processed yet, a running batch's first included
        (``None``: none)."""

    @abstractmethod
    def _instance(self) -> Consumer:
        """The consumer instance the partition's hooks run on (made when first needed)."""

    @abstractmethod
    def _call(self, hook: str, event: str) -> None:
        """Run ``hook`` (``revoked``, ``shutdown``...) on its consumers, with ``event``."""

    @abstractmethod
    def _release(self) -> None:
        """A wait is over (a back-off, a pause, a predecessor's batch): run again."""

    @abstractmethod
    def mark(self, next_offset: int, sync: bool, metadata: str | None = None) -> bool:
        """Processed through ``next_offset - 1``; with ``sync``, commit now; ``metadata`` goes
        with the commit of that offset (see :mod:`~conveyor.processing.offset_metadata`).
        False when the partition was revoked (or the commit failed)."""

    @abstractmethod
    def request_seek(self, offset: int) -> None:
        """The consumer seeks to ``offset``."""

    @abstractmethod
    def request_pause(self, offset: int | None, timeout: float | None) -> None:
        """The consumer pauses the partition (from ``offset``; for ``timeout`` seconds)."""

    # -- the listener's calls (its thread) ----------------------------------------------------

    def revoke(self) -> None:
        """The partition was taken away: drop what is pending; ``revoked()`` runs on a worker."""
        with self.lock:
            self.revoked = True
            self._drop_pending()
            idle = not self.scheduled
        latency = self.context.latency
        if latency is not None:
            latency.forget(self.topic, self.partition)
        if self.consumer is not None and not self.stopped:
            self.listener.submit(self._run_revoked)
        elif idle:  # no job runs here to close them as it ends, no revoked() after which to
            self.close_stores()

    def hold(self) -> None:
        """Take no new batch (quiet); what runs finishes, what is pending stays."""
        with self.lock:
            self.held = True

    def stop(self) -> None:
        """The app stops: drop what is pending and start nothing more."""
        with self.lock:
            self.stopped = True
            self._drop_pending()

    def _drop_pending(self) -> None:
        """With the lock held: the partition is over here (revoked or stopped); drop what
        waits and the timer that would run it."""
        self.pending.clear()
        self._cancel_resume_timer()
        self._dropped(seek=False)

    def throttle(self) -> bool:
        """Too much is pending and the workers are slow: returns True when the listener should
        now pause fetching this partition (it resumes once the backlog drained).

        False when the backlog drained below its low-water mark meanwhile: the worker that
        drained it saw no backpressure to lift, and no later hand-out would resume a
        partition with nothing pending."""
        with self.lock:
            if self.backpressure or self.revoked or self.pending.size < self._low_water:
                return False
            self.backpressure = True
            return True

    def discard_pending(self) -> None:
        """A seek is done: what was fetched before it is stale."""
        with self.lock:
            self.pending.clear()
            self.eof = False  # librdkafka tells the end again once the read gets there
            self.polls.clear()
            self._dropped(seek=True)

    def committable(self) -> int | None:
        """The offset to commit for this partition (``None``: nothing marked, revoked, or its
        offsets go through transactions): the marked one, or the lowest offset whose copy is
        not acknowledged yet, if lower."""
        if self.revoked or self.transactional:
            return None
        return self._fence(self.marked)

    def _fence(self, offset: int | None) -> int | None:
        return self.copies.fence(offset)

    def wait_for_copies(self, deadline: float) -> bool:
        """Block until no copy sent for this partition awaits its acknowledgement (or the
        monotonic ``deadline``); True when none does."""
        return self.copies.wait(deadline)

    def follow(self, predecessor: PartitionCore) -> None:
        """Start only after ``predecessor`` (the same partition, revoked) finished its batch."""
        with predecessor.lock:
            if predecessor.scheduled:
                self.held = True
                predecessor.successor = self
                self.predecessor = predecessor

    def waits_for_predecessor(self) -> bool:
        """Whether the revoked predecessor's last batch still runs (it releases this one)."""
        predecessor = self.predecessor
        return predecessor is not None and predecessor.successor is self

    @property
    def in_lane(self) -> bool:
        """Its consumer runs in no virtual partition's lane (a lane says True)."""
        return False

    @property
    def kafka(self) -> Mapping[str, Any]:
        """The app's librdkafka settings."""
        return self.context.settings.kafka

    @property
    def tracing(self) -> Tracing | None:
        """The app's tracing (``None`` when the app has none)."""
        return self.context.tracing

    def run_shutdown(self) -> None:
        """The app stops: what its stores kept is flushed; run the consumers' ``shutdown()``."""
        self.flush_idle()
        self._call("shutdown", ev.CONSUMER_SHUTDOWN)

    @abstractmethod
    def flush_idle(self) -> None:
        """Before the offsets of a revoked partition or a stopping app are committed: flush
        the store writes kept for the next flush, and mark their offset, when no job runs (a
        running job's are its own to flush or drop)."""

    def _report_dispatch_failure(self, offset: int, error: Exception) -> None:
        _copy_failed.log(
            logging.ERROR,
            f"{self.topic}/{self.partition}",
            "%s/%s: could not move offset %s to the dead letter queue (%r); it stays in the "
            "retry path",
            self.topic,
            self.partition,
            offset,
            error,
        )
        monitor = self.context.monitor
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(
                ev.ERROR_OCCURRED,
                type="consumer.dispatch.error",
                error=error,
                topic=self.topic,
                partition=self.partition,
                offset=offset,
                attempt=self.attempt,
            )

    def _cancel_resume_timer(self) -> None:
        timer, self._resume_timer = self._resume_timer, None
        if timer is not None:
            timer.cancel()

    def _run_revoked(self) -> None:
        self.listener.job_started()
        try:
            self._call("revoked", ev.CONSUMER_REVOKED)
        finally:
            with self.lock:
                idle = not self.scheduled  # else the job closes them as it ends
            if idle:
                self.close_stores()
            self.listener.job_finished()

    def _gone(self) -> bool:
        return self.revoked or self.stopped

    # -- state stores -------------------------------------------------------------------------

    def state_views(self) -> Mapping[str, State]:
        """The partition's stores by name. Open whenever its hooks run: batches and ticks wait
        for the restore thread to open them."""
        stores = self.stores
        if stores is None:
            return {}
        if not stores.opened:
            raise NotAssignedError(
                f"{self.topic}/{self.partition}: its stores are not open (being restored, or "
                "the partition was revoked)"
            )
        return stores.views

    def stage_state(self, producer: Producer, kept_only: bool = False) -> Callable[[], None] | None:
        """A transaction is about to commit: send the batch's store writes to their
        changelogs with ``producer`` (in the transaction); returns what writes them to the
        local stores once it committed (``None``: nothing was written). ``kept_only``: the
        writes kept as blocks ended, not the running batch's (a joint transaction's commit,
        on another thread)."""
        stores = self.stores
        if stores is None or not stores.opened or not stores.dirty:
            return None
        staged = stores.stage(producer, kept_only=kept_only)
        return lambda: stores.apply(staged, kept_only=kept_only)

    def handed_to_joint(self) -> bool:
        """After a batch or a tick ended well: hand what it wrote after its block to the open
        joint transaction if that holds the partition's batches (once no commit is under way),
        and say whether it does (its commit then marks their offset and writes their stores;
        else the partition flushes them itself)."""
        seat = self.joint_seat
        if seat is None:
            return False
        return seat.holds() if self.stores is None else seat.keep_if_held()

    def keep_state(self) -> None:
        """A block in the joint transaction ended well: its stores' writes wait for the
        transaction's commit (:meth:`stage_state` sends them then)."""
        if self.stores is not None and self.stores.opened:
            self.stores.keep()

    def rewind(self, first: int, in_batch: bool) -> None:
        """On this partition's own thread: the joint transaction with its batches from
        ``first`` on was aborted; their store writes go and they are read again (``in_batch``:
        the running batch is one of them, and its failure is not the route's to retry)."""
        if self.stores is not None:
            self.stores.discard_all()
        self.rewound = in_batch
        self.request_pause(first, 0.0)

    def rewind_due(self) -> None:
        """From the thread that aborted a joint transaction: a job of this partition's own
        runs the rewind (a running job takes it at its next block or as it ends)."""
        with self.lock:
            self._rewind_asked = True
        self.side_work_due()

    def _take_rewind(self) -> bool:
        """In the partition's job: run the rewind an aborted joint transaction left, if any."""
        if not self._rewind_asked:
            return False
        self._rewind_asked = False
        seat = self.joint_seat
        first = None if seat is None else seat.take_rewind()
        if first is not None and not self.revoked:
            self.rewind(first, in_batch=False)
        return True

    def request_rebuild(self, names: list[str]) -> None:
        """On the listener's thread: a job of the partition's own deletes the local copies of
        stores ``names`` and restores them from their changelogs, between batches (the
        batches wait; the partition stays assigned)."""
        if self.route.virtual_partitions is not None:
            raise ConfigurationError(
                f"{self.topic}/{self.partition}: virtual partitions' stores are not rebuilt "
                "while the app runs (a restart without their folders rebuilds them)",
                "virtual_partitions",
            )
        stores = self.stores
        if stores is None or not stores.opened:
            raise NotAssignedError(
                f"{self.topic}/{self.partition}: its stores are not open here (being restored: "
                "a restore starts from what the changelog holds anyway)"
            )
        with self.lock:
            self._rebuild_asked = names
        self.side_work_due()

    def _take_rebuild(self) -> None:
        """In the partition's job, its kept writes flushed: the rebuild asked, if any (a
        store left closed by a failure is opened again before the next batch)."""
        with self.lock:
            names, self._rebuild_asked = self._rebuild_asked, None
        if names is None or self.revoked or self.stores is None or not self.stores.opened:
            return
        if self.joint_seat is not None:
            self.joint_seat.settle()  # the open transaction's writes committed first
        try:
            self.stores.rebuild(names)
        except Exception as exc:
            logging.getLogger("conveyor.state").error(
                "%s/%s: rebuilding %s failed: %r", self.topic, self.partition, names, exc
            )

    @abstractmethod
    def side_work_due(self) -> None:
        """Work waits that a job of the partition's own does (a flush, a rewind): start one
        unless one runs (it does it as it ends)."""

    def close_stores(self) -> None:
        """The partition is over here: let go of its stores (their files stay)."""
        if self.stores is not None:
            self.stores.close()

    # -- asked by the consumer (on its worker) and by the failure policy ----------------------

    @property
    def group_id(self) -> str:
        """The consumer group that reads the partition."""
        return self.listener.group_id

    def producer(self) -> Producer:
        """The app's producer."""
        return self.context.producer()

    def send_held(self, offset: int, message: dict[str, Any], producer: Producer) -> DeliveryHandle:
        """Send ``message`` (a produce dict) without waiting, and commit nothing at or past
        ``offset`` until the broker acknowledged it (a dead letter, an at-least-once pipe, an
        RPC reply).

        A failed delivery is sent again after the topic's back-off, for as long as this
        partition is assigned; once it is revoked or the app stops, the offset stays
        uncommitted, so the message is read again rather than lost. Only commits wait for the
        report, so the producer's poller is not hurried for it."""
        return self.copies.send(offset, message, producer)

    def group_metadata(self) -> Any:
        """The group's metadata, for a transaction's offsets (asked of the listener)."""
        return self.listener.group_metadata()

    def transactional_producer(self) -> Producer:
        """The app's transactional producer (consume-transform-produce transactions)."""
        return self.context.transactional_producer()

    def offsets_in_transactions(self) -> None:
        """From now on this partition's offsets are committed by transactions only: the
        listener no longer commits them (an older offset it committed could land after a
        transaction's and move the group back). The first time, what was marked before is
        committed synchronously, behind any asynchronous commit still on its way."""
        if self.transactional:
            return
        marked = self.committable()
        if marked is not None:
            self._commit_now(marked)
        self.transactional = True

    def _commit_now(self, offset: int) -> bool:
        """Commit ``offset`` now, with the metadata it carries; False when refused."""
        return self.listener.commit_now(
            self.topic, self.partition, offset, self.metadata.at(offset)
        )

    def forget_group_metadata(self) -> None:
        """A transaction's offsets were refused: ask librdkafka for the group's metadata again
        (the generation may have moved on without an assignment)."""
        self.listener.forget_group_metadata()

    def enhance_dlq_message(self, dlq_message: dict[str, Any], message: Message) -> dict[str, Any]:
        enhanced = self._instance().enhance_dlq_message(dlq_message, message)
        return dlq_message if enhanced is None else enhanced

    def dispatch_to_dlq(
        self, message: Message, dlq_topic: str, error: BaseException | None = None
    ) -> None:
        """The consumer moves ``message`` to the dead letter queue itself (``error``: why)."""
        self.policy.dispatch(message, error, self.attempt, dlq_topic, self)

    def request_resume(self) -> None:
        """The consumer resumes the partition: fetch it again, then run what waits."""
        self.listener.resume(self.topic, self.partition, then=self._release)

    @property
    def offset_metadata(self) -> str | None:
        """The metadata of the partition's offset: the highest mark's that gave one, else what
        the group had committed when the partition was assigned."""
        return self.metadata.latest

    def offset_at(self, when: float) -> int:
        """The first offset at or after ``when`` (epoch seconds), or the partition's end when no
        message is that new (asked of the broker, on the listener's thread)."""
        return self.listener.offset_for_time(self.topic, self.partition, when)
