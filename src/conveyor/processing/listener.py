"""A listener: one thread and one librdkafka consumer per subscription group.

It polls adaptively (block for the first message up to ``max_wait_time``, then take what
librdkafka already holds, without waiting), hands each partition's messages to that
partition's executor, and commits what the executors marked. It owns its collaborators: the
rebalances go to its :class:`~conveyor.processing.assignments.Assignments`, the commits to its
:class:`~conveyor.processing.commits.Commits`, and what it reports to its
:class:`~conveyor.processing.listener_reports.Reporter`.

librdkafka's consumer is touched only on the listener's thread (its
:class:`~conveyor.processing.listener_thread.ListenerThread`). Executors ask for what they
need by name (:meth:`Listener.pause`, :meth:`~Listener.resume`, :meth:`~Listener.seek`,
:meth:`~Listener.commit_now`, :meth:`~Listener.group_metadata`); those queue as commands
that run between polls (one from another thread ends the poll's wait). The listener never
writes an executor's state: it calls the executor's own methods (``add``, ``hold``, ``stop``,
``throttle``, ``revoke``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import ConsumerClient, Partition, raw_error, raw_partition, raw_topic
from conveyor.errors import KafkaError, NotAssignedError
from conveyor.hook_results import run_hook
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.connection import connection_reporter
from conveyor.processing.assignments import Assignments
from conveyor.processing.commits import Commits
from conveyor.processing.executor import PartitionExecutor
from conveyor.processing.idle_ticks import IdleTicks, ticks
from conveyor.processing.listener_reports import Reporter, consumer_config
from conveyor.processing.listener_thread import HandedOver, ListenerThread
from conveyor.processing.partition_core import PartitionCore
from conveyor.processing.positions import StartPositions, initial_position
from conveyor.processing.strategies import FailurePolicy
from conveyor.processing.virtual import VirtualPartitionExecutor

if TYPE_CHECKING:
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.listener_actions import FetchedPartition
    from conveyor.processing.timers import Timers
    from conveyor.routing.topic import Topic

__all__ = ["Listener"]

_log = logging.getLogger("conveyor.processing")

_QUIET_POLL = 0.2
_THROTTLED_POLL = 0.01
# A long max_wait_time is waited out in polls of at most this long: commits come on time, and
# stop() and commands never wait a whole max_wait_time where the poll cannot be woken.
_POLL_SLICE = 0.5
_ROOM_WAIT = 1.0


class Listener:
    """Reads the topics of one subscription group and feeds their partitions' executors."""

    run_here: Callable[[Callable[[], None]], None]
    """Run a job on the listener's thread (a quick batch), counted as the pool's work: its
    :class:`~conveyor.processing.listener_thread.ListenerThread`'s ``run_here``."""

    def __init__(
        self,
        context: ProcessingContext,
        name: str,
        group_id: str,
        routes: list[Topic],
        submit: Callable[[Callable[[], None]], None],
        timers: Timers,
        submit_coroutine: Callable[[Coroutine[Any, Any, None], str], None] | None = None,
        run_here: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.context = context
        self.name = name
        self._group_id = group_id
        self.routes = {route.name: route for route in routes}
        self._patterns = [route for route in routes if route.pattern is not None]
        self._resolved: dict[str, Topic | None] = {}  # topic name -> its route (patterns)
        self.submit = submit
        self._submit_coroutine = submit_coroutine
        self._timers = timers
        settings = context.settings
        self._policies = {route.name: FailurePolicy.of_route(route, context) for route in routes}
        self.max_wait_time = min((r.max_wait_time or settings.max_wait_time) for r in routes)
        self.max_messages = max((r.max_messages or settings.max_messages) for r in routes)
        self._idle_ticks = IdleTicks(self.max_wait_time) if any(map(ticks, routes)) else None
        # Each call into librdkafka gives up the GIL and may wait a switch interval (5 ms) to get
        # it back while workers run Python, so take what librdkafka holds in large gulps.
        self._drain = max(self.max_messages * 10, 5_000)
        self.direct = routes[0].direct
        config = consumer_config(settings, routes, group_id, f"{settings.client_id}-{name}")
        self._stopping = threading.Event()
        self.executors: dict[Partition, PartitionCore] = {}
        self.reporter = Reporter(name, group_id, context, self.executors, self._stopping)
        reporter = self.reporter
        self._client = ConsumerClient(
            config,
            on_error=reporter.error,
            on_fetch_error=reporter.fetch_error,
            on_connection=connection_reporter(context.monitor),
            on_statistics=reporter.statistics,
            on_commit_refused=self._commit_refused,
            wakeable=True,  # commands from other threads end its wait (see command)
        )
        interval = config.get("auto.commit.interval.ms", 5000)  # the route's own, else the app's
        self._commits = Commits(self._client, reporter.committed, float(interval) / 1000)
        # Resolving start offsets may wait for a predecessor's transaction; within most of
        # max.poll.interval.ms, so that the member is not thrown out of the group meanwhile.
        poll_interval = float(config.get("max.poll.interval.ms", 300_000)) / 1000
        positions = StartPositions(
            self._client,
            initial_position(str(config["auto.offset.reset"])),
            budget=max(10.0, poll_interval * 0.8),
            on_stall=reporter.fence,
            on_error=reporter.offsets_error,
            stopping=self._stopping,
        )
        self.assignments = Assignments(
            self,
            self._client,
            positions,
            self.executors,
            self._commits,
            reporter,
            group_id=group_id,
            incremental=config.get("group.protocol") == "consumer"
            or "cooperative" in str(config.get("partition.assignment.strategy", "")),
        )
        self._discarding: set[FetchedPartition] = set()
        """Executors sought since the last poll: what that poll fetched for them is stale."""
        self.quieted = False
        """Whether :meth:`quiet` was called (a plain attribute: executors read it per poll)."""
        # The lock is taken directly on the job path (a Condition's own ``with`` runs Python).
        self._jobs_lock = threading.Lock()
        self._jobs = threading.Condition(self._jobs_lock)
        # Partitions with more pending than their high-water mark: the listener waits for
        # their workers to drain them before it polls again (librdkafka's own queue limits
        # then hold the rest), and pauses them only if the wait outlasts the slice below.
        self._room = threading.Condition()
        self._over_limit: set[FetchedPartition] = set()
        self._running_jobs = 0
        self.state = "created"
        """created, running, quiet, stopping, stopped or crashed."""
        self.last_poll: float | None = None
        """When the listener last asked librdkafka for messages (``time.time()``)."""
        self.thread = ListenerThread(
            name,
            self._run,
            wake=self._client.wake,
            report=reporter.error,
            timers=timers,
            stopping=self._stopping,
            call_wait=self.max_wait_time + 30.0,
            run_counted=run_here,
        )
        # Its own method, not wrapped: a quick batch run here is a lone message's latency path.
        self.run_here = self.thread.run_here

    # -- lifecycle (the runner) ---------------------------------------------------------------

    @property
    def group_id(self) -> str:
        """The consumer group (``group.id``) this listener reads in."""
        return self._group_id

    def start(self) -> None:
        """Subscribe (or assign the routes' partitions directly) and start polling."""
        assignments = self.assignments
        if self.direct:
            assignments.assign_directly(
                [(r.name, p) for r in self.routes.values() for p in r.assign or ()]
            )
        else:
            self._client.subscribe(
                list(self.routes), assignments.on_assign, assignments.on_revoke, assignments.on_lost
            )
        self.state = "running"
        self.thread.start(take_over=self.context.settings.inline_quick_batches)

    def stop(self) -> None:
        """Stop polling (the thread finishes its current poll)."""
        if self.state in ("running", "quiet"):
            self.state = "stopping"
        self._stopping.set()
        self._client.wake()

    def quiet(self) -> None:
        """Take no new batches; keep the group membership (polls continue, partitions paused).

        Batches already running finish; what was fetched but not handed out stays pending."""
        self.quieted = True
        if self.state == "running":
            self.state = "quiet"
        for executor in list(self.executors.values()):
            executor.hold()
        self._client.wake()  # the poll in progress ends: the partitions pause now

    def join(self, timeout: float) -> None:
        """Wait for the thread that polls to end (after :meth:`stop`)."""
        self.thread.join(timeout)

    def shut_down(self, deadline: float) -> bool:
        """After polling stopped: wait for the jobs, run ``shutdown()`` hooks, commit, close.
        Returns whether every job had finished in time."""
        executors = list(self.executors.values())
        for executor in executors:
            executor.stop()
        finished = self.wait_for_jobs(deadline)
        for executor in executors:
            executor.run_shutdown()
        for executor in executors:  # copies still in flight: their offsets wait for them
            executor.wait_for_copies(deadline)
        self.thread.run_commands()
        self._commits.marked(self.executors, sync=True)
        self._client.close()
        if self.state != "crashed":
            self.state = "stopped"
        return finished

    def close(self) -> None:
        """Release the librdkafka consumer of a listener that never started."""
        self._client.close()

    # -- actions executors ask for (run on this thread) --------------------------------------

    def pause(self, topic: str, partition: int) -> None:
        """Stop fetching ``topic``/``partition``."""
        self.thread.command(lambda: self._client.pause([(topic, partition)]))

    def resume(self, topic: str, partition: int, then: Callable[[], None] | None = None) -> None:
        """Fetch ``topic``/``partition`` again; ``then`` runs right after, on this thread."""

        def resume_now() -> None:
            self._client.resume([(topic, partition)])
            if then is not None:
                then()

        self.thread.command(resume_now)

    def seek(self, executor: FetchedPartition, offset: int) -> None:
        """Continue ``executor``'s partition from ``offset``; what was fetched before is dropped."""

        def seek_now() -> None:
            self._discarding.add(executor)  # what the current poll fetched predates the seek
            executor.discard_pending()
            self._client.seek(executor.topic, executor.partition, offset)

        self.thread.command(seek_now)

    def call_with_executor(
        self,
        topic: str,
        partition: int,
        action: Callable[[PartitionCore, Listener], Any],
        timeout: float,
    ) -> tuple[Any] | None:
        """Run ``action(executor, self)`` on this thread for an assigned partition (its
        executor made now if nothing was fetched yet); ``(result,)``, or ``None`` when this
        thread did not get to it in time. What ``action`` raises is raised here."""

        def run() -> tuple[Any]:
            executor = self._executor(topic, partition)
            if executor is None or (topic, partition) not in self.assignments.partitions:
                raise NotAssignedError(f"{topic}/{partition} is not assigned to this process")
            return (action(executor, self),)

        return self.thread.call(run, timeout)  # type: ignore[no-any-return]

    def high_watermark(self, topic: str, partition: int) -> int:
        """On this thread: the partition's next offset, asked of its leader."""
        return self._client.query_watermarks(topic, partition)[1]

    def offset_for_time(self, topic: str, partition: int, when: float) -> int:
        """The first offset at or after ``when`` (epoch seconds), or the partition's end when
        nothing is that new; asked on this thread (a caller on another waits for it).

        Raises:
            KafkaError: the broker did not answer, or this thread did not get to it in time.
        """

        def find() -> int:
            found = self._client.offset_for_time(topic, partition, int(when * 1000))
            return found if found >= 0 else self._client.query_watermarks(topic, partition)[1]

        offset = self.thread.call(find)
        if offset is None:
            raise KafkaError(f"{self.name}: no offset by time for {topic}/{partition} in time")
        return int(offset)

    def commit_now(
        self, topic: str, partition: int, next_offset: int, metadata: str | None = None
    ) -> bool:
        """Commit ``next_offset`` (with ``metadata``) for the partition and wait; False when
        refused or not done."""
        commits = self._commits
        return bool(self.thread.call(lambda: commits.now(topic, partition, next_offset, metadata)))

    def forget_group_metadata(self) -> None:
        """Drop the cached metadata: the next transaction asks librdkafka again."""
        self.assignments.group_metadata = None

    def group_metadata(self) -> Any:
        """The group's metadata, for committing offsets inside a producer's transaction: the
        one taken at the last assignment (it changes only with the group's generation), else
        asked of librdkafka on this listener's thread."""
        cached = self.assignments.group_metadata
        return cached if cached is not None else self.thread.call(self._client.group_metadata)

    def over_limit(self, executor: FetchedPartition) -> None:
        """A partition's backlog passed its high-water mark (called on this thread)."""
        with self._room:
            self._over_limit.add(executor)

    def drained(self, executor: FetchedPartition) -> None:
        """A partition's backlog fell below its low-water mark (called by a worker)."""
        if executor in self._over_limit:
            with self._room:
                self._over_limit.discard(executor)
                self._room.notify_all()

    def submit_coroutine(self, coroutine: Coroutine[Any, Any, None], name: str = "") -> None:
        """Run ``coroutine`` on the app's event loop (lanes of an ``async def consume()``)."""
        if self._submit_coroutine is None:
            self.submit(lambda: run_hook(coroutine))
        else:
            self._submit_coroutine(coroutine, name)

    def job_started(self) -> None:
        """A job of this listener's executors starts (on a worker, or on this thread)."""
        with self._jobs_lock:
            self._running_jobs += 1

    def job_finished(self) -> None:
        """A job of this listener's executors ended."""
        with self._jobs_lock:
            self._running_jobs -= 1
            if self._running_jobs == 0:
                self._jobs.notify_all()

    def wait_for_jobs(self, deadline: float) -> bool:
        """Block until no job of this listener runs (or the monotonic ``deadline``)."""
        with self._jobs:
            return self._jobs.wait_for(
                lambda: self._running_jobs == 0, timeout=max(0.0, deadline - time.monotonic())
            )

    def assigned(self) -> set[Partition]:
        """The partitions assigned to this listener now (a copy)."""
        return set(self.assignments.partitions)

    def committed(self) -> dict[Partition, int]:
        """The offsets this listener committed last, per partition (a copy)."""
        return dict(self._commits.offsets)

    def command(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the listener's thread before it hands out the next fetched
        messages (see :meth:`ListenerThread.command
        <conveyor.processing.listener_thread.ListenerThread.command>`)."""
        self.thread.command(action)

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self.assignments.start_direct()
            self._loop()
        except HandedOver:
            return  # another thread holds the listener's role now
        except BaseException as exc:
            self.state = "crashed"
            _log.exception("listener %s crashed", self.name)
            self.context.on_crash(exc, f"listener {self.name}")

    def _loop(self) -> None:
        client = self._client
        poll_batch = client.poll_batch
        monitor = self.context.monitor
        commits = self._commits
        assigned = self.assignments.partitions  # changed in place by the rebalances
        commands, run_commands = self.thread.commands, self.thread.run_commands
        paused_all = False
        while not self._stopping.is_set():
            run_commands()
            self._discarding.clear()  # the next poll fetches after any seek done so far
            self.last_poll = time.time()
            if self.quieted:
                if not paused_all:
                    paused_all = True
                    client.pause(client.assignment())
                poll_batch(_QUIET_POLL, 1)  # keeps the membership; paused partitions fetch nothing
                continue
            if ev.CONNECTION_LISTENER_FETCH_LOOP in monitor.subscribed:
                monitor.instrument(ev.CONNECTION_LISTENER_FETCH_LOOP, listener=self.name)
            now = time.monotonic()
            if now >= commits.due:
                commits.marked(self.executors, sync=False)
            if self._idle_ticks is not None and now >= self._idle_ticks.next_check:
                self._idle_ticks.check(assigned, self._ticking_executor, now)
            if self._over_limit:
                self._wait_for_room()
            # While a partition waits for its backlog to drain, its resume comes as a command:
            # poll in short slices then, so that the command does not wait out a long poll.
            throttled = any(executor.backpressure for executor in self.executors.values())
            wait = _THROTTLED_POLL if throttled else min(self.max_wait_time, _POLL_SLICE)
            batch = poll_batch(wait, self._drain)
            if not batch:
                continue
            if commands:
                run_commands()
            if ev.MESSAGES_POLLED in monitor.subscribed:
                monitor.instrument(ev.MESSAGES_POLLED, listener=self.name, count=len(batch))
            self._distribute(batch)

    def _distribute(self, batch: list[Any]) -> None:
        """Hand each partition's run of ``batch`` to its executor, in order.

        librdkafka returns a poll as runs of one partition each (a fetch response per
        partition). The runs are found with C-level passes (``map`` over the messages'
        accessors, ``groupby``) rather than Python work per message: on a 2-core machine that
        per-message loop was the listener's largest cost after librdkafka's own."""
        if len(batch) == 1:  # a lone message: the latency path, kept short
            [raw] = batch
            if raw.error() is None:
                self._flush_run(batch, raw.topic(), raw.partition(), alone=True)
                self._discarding.clear()
                return
        # (any(), not a count of None: librdkafka's error objects refuse == None.)
        if any(map(raw_error, batch)):
            self._distribute_with_errors(batch)  # rare: end of partition, fetch errors
            return
        assigned = self.assignments.partitions
        if len(assigned) == 1:
            # One partition assigned: the whole poll is its run (librdkafka drops what was
            # fetched for partitions no longer assigned; the ends are checked all the same).
            [(topic, partition)] = assigned
            first, last = batch[0], batch[-1]
            if raw_partition(first) == partition == raw_partition(last) and raw_topic(
                first
            ) == topic == raw_topic(last):
                self._flush_run(batch, topic, partition, alone=True)
                self._discarding.clear()
                return
        count = len(batch)
        partitions = list(map(raw_partition, batch))
        if len(self.routes) == 1 and not self._patterns:
            [topic] = self.routes
            first = partitions[0]
            if partitions.count(first) == count:
                self._flush_run(batch, topic, first, alone=True)
            else:
                start = 0
                for partition, members in itertools.groupby(partitions):
                    size = len(list(members))
                    self._flush_run(batch[start : start + size], topic, partition)
                    start += size
        else:
            start = 0
            for (topic, partition), keys in itertools.groupby(
                zip(map(raw_topic, batch), partitions, strict=True)
            ):
                size = len(list(keys))
                self._flush_run(batch[start : start + size], topic, partition)
                start += size
        self._discarding.clear()

    def _distribute_with_errors(self, batch: list[Any]) -> None:
        run: list[Any] = []
        run_topic: str | None = None
        run_partition = -1
        for raw in batch:
            if raw.error() is not None:
                self._flush_run(run, run_topic, run_partition)
                run, run_topic = [], None
                if self._client.fetch_error(raw):
                    executor = self._executor(raw.topic(), raw.partition())
                    if executor is not None:
                        executor.reached_eof()
                continue
            topic = raw.topic()
            partition = raw.partition()
            if partition != run_partition or topic != run_topic:
                self._flush_run(run, run_topic, run_partition)
                run, run_topic, run_partition = [], topic, partition
            run.append(raw)
        self._flush_run(run, run_topic, run_partition)
        self._discarding.clear()

    def _ticking_executor(self, key: Partition) -> PartitionCore | None:
        return self._executor(*key) if ticks(self.route_of(key[0])) else None

    def _flush_run(
        self, run: list[Any], topic: str | None, partition: int, alone: bool = False
    ) -> None:
        """Hand ``run`` to its partition's executor (``alone``: it is all the poll brought)."""
        if not run or topic is None:
            return
        executor = self.executors.get((topic, partition))
        if executor is None:
            executor = self._executor(topic, partition)
        if executor is not None and executor not in self._discarding:
            # librdkafka's cached high watermark (from the fetch responses): no broker call.
            high = self._client.cached_high_watermark(topic, partition)
            executor.fed += 1
            executor.add(run, high if high >= 0 else None, alone)

    def prepare(self, partitions: list[Partition]) -> None:
        """Newly assigned ``partitions`` whose routes have state stores get their executors
        now: their stores restore from the assignment on, ready when messages come."""
        for topic, partition in partitions:
            route = self.route_of(topic)
            if route is not None and route.state:
                self._executor(topic, partition)

    def _executor(self, topic: str, partition: int) -> PartitionCore | None:
        key = (topic, partition)
        executor = self.executors.get(key)
        if executor is None:
            route = self.route_of(topic)
            if route is None:
                return None
            kind = (
                PartitionExecutor if route.virtual_partitions is None else VirtualPartitionExecutor
            )
            executor = self.executors[key] = kind(
                self,
                route,
                partition,
                self.context,
                self._policies[route.name],
                self._timers,
                topic,
            )
            self.assignments.hand_over(executor)
        return executor

    def route_of(self, topic: str) -> Topic | None:
        """The route that reads ``topic``: by its name, else the first pattern it matches."""
        route = self.routes.get(topic)
        if route is not None or not self._patterns:
            return route
        if topic not in self._resolved:
            self._resolved[topic] = next((r for r in self._patterns if r.matches(topic)), None)
        return self._resolved[topic]

    def _wait_for_room(self) -> None:
        with self._room:
            self._room.wait_for(
                lambda: not self._over_limit or self._stopping.is_set(), timeout=_ROOM_WAIT
            )
            waiting = list(self._over_limit)
        # Workers are slow: stop fetching those partitions, keep polling for the group.
        slow = [executor for executor in waiting if executor.throttle()]
        if slow:
            self._client.pause([(e.topic, e.partition) for e in slow])

    # -- offsets ------------------------------------------------------------------------------

    def _commit_refused(
        self, offsets: list[tuple[str, int, int]], error: KafkaError, sync: bool
    ) -> None:
        """The group refused a commit (on this thread): the next commit sends those offsets
        again while the partitions stay assigned; reported, and logged."""
        self._commits.refused(offsets)
        self.reporter.commit_refused(offsets, error, sync)
