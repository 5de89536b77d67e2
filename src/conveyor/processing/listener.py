"""A listener: one thread and one librdkafka consumer per subscription group.

It polls adaptively (block for the first message up to ``max_wait_time``, then take what
librdkafka already holds, without waiting), hands each partition's messages to that
partition's executor, handles rebalances, and commits what the executors marked.

librdkafka's consumer is touched only on this thread. Executors ask for what they need by
name (:meth:`Listener.pause`, :meth:`~Listener.resume`, :meth:`~Listener.seek`,
:meth:`~Listener.commit_now`, :meth:`~Listener.group_metadata`); those queue as commands
that run between polls (one from another thread ends the poll's wait). The listener never
writes an executor's state: it calls the executor's own methods (``add``, ``hold``, ``stop``,
``throttle``, ``revoke``).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import ConsumerClient, Partition, raw_error, raw_partition, raw_topic
from conveyor.errors import KafkaError, NotAssignedError
from conveyor.hook_results import run_hook
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.connection import connection_reporter
from conveyor.processing.commits import Commits
from conveyor.processing.executor import PartitionExecutor
from conveyor.processing.idle_ticks import IdleTicks, ticks
from conveyor.processing.listener_reports import ListenerReports, consumer_config
from conveyor.processing.partition_core import PartitionCore
from conveyor.processing.positions import StartAbandoned, StartPositions, initial_position
from conveyor.processing.strategies import FailurePolicy
from conveyor.processing.virtual import VirtualPartitionExecutor

if TYPE_CHECKING:
    from conveyor.processing.context import ProcessingContext
    from conveyor.processing.timers import Timers
    from conveyor.routing.topic import Topic

__all__ = ["Listener"]

_log = logging.getLogger("conveyor.processing")
_run: Callable[[Callable[[], None]], None] = operator.call  # a job, run by the caller

_QUIET_POLL = 0.2
_THROTTLED_POLL = 0.01
# A long max_wait_time is waited out in polls of at most this long: commits come on time, and
# stop() and commands never wait a whole max_wait_time where the poll cannot be woken.
_POLL_SLICE = 0.5
_ROOM_WAIT = 1.0
# A batch that runs this long on the listener's own thread (a quick partition's, see the
# executor) hands the listener's role (polling, hand-offs, commits) to a new thread: a slow
# batch must not cost the group membership (max.poll.interval.ms) nor hold up the others.
_TAKE_OVER_AFTER = 0.5


class _HandedOver(Exception):
    """Ends a listener thread whose role another thread took while it ran a batch."""


class Listener(ListenerReports):
    """Reads the topics of one subscription group and feeds their partitions' executors."""

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
        self._run_here_counted = run_here or _run
        self._role = threading.Lock()  # who is the listener's thread, and its inline job
        self._inline_since: float | None = None
        self._inline_job: Callable[[], None] | None = None
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
        # librdkafka's group protocols: eager (the default) replaces the whole assignment at
        # each rebalance; cooperative-sticky and KIP-848's consumer protocol add and remove.
        self._incremental = config.get("group.protocol") == "consumer" or "cooperative" in str(
            config.get("partition.assignment.strategy", "")
        )
        self._client = ConsumerClient(
            config,
            on_error=self._on_error,
            on_fetch_error=self._on_fetch_error,
            on_connection=connection_reporter(context.monitor),
            on_statistics=self._on_statistics,
            on_commit_refused=self._on_commit_refused,
            wakeable=True,  # commands from other threads end its wait (see _command)
        )
        # Resolving start offsets may wait for a predecessor's transaction; within most of
        # max.poll.interval.ms, so that the member is not thrown out of the group meanwhile.
        poll_interval = float(config.get("max.poll.interval.ms", 300_000)) / 1000
        self._stopping = threading.Event()
        self._positions = StartPositions(
            self._client,
            initial_position(str(config["auto.offset.reset"])),
            budget=max(10.0, poll_interval * 0.8),
            on_stall=self._fence,
            on_error=self._on_offsets_error,
            stopping=self._stopping,
        )
        self.executors: dict[Partition, PartitionCore] = {}
        self._direct_start: list[Partition] | None = None  # a direct assignment not made yet
        self._assigned: set[Partition] = set()
        self._group_metadata: Any = None
        self._retiring: dict[Partition, PartitionCore] = {}
        self._commands: deque[Callable[[], None]] = deque()
        self._discarding: set[PartitionCore] = set()
        """Executors sought since the last poll: what that poll fetched for them is stale."""
        interval = config.get("auto.commit.interval.ms", 5000)  # the route's own, else the app's
        self._commit_interval = float(interval) / 1000
        self._next_commit = time.monotonic() + self._commit_interval
        self._commits = Commits(self._client, self._report_commit)
        self._start_metadata: dict[Partition, str] = {}  # committed before the assignment
        self.quieted = False
        """Whether :meth:`quiet` was called (a plain attribute: executors read it per poll)."""
        # The lock is taken directly on the job path (a Condition's own ``with`` runs Python).
        self._jobs_lock = threading.Lock()
        self._jobs = threading.Condition(self._jobs_lock)
        # Partitions with more pending than their high-water mark: the listener waits for
        # their workers to drain them before it polls again (librdkafka's own queue limits
        # then hold the rest), and pauses them only if the wait outlasts the slice below.
        self._room = threading.Condition()
        self._over_limit: set[PartitionCore] = set()
        self._running_jobs = 0
        self.state = "created"
        """created, running, quiet, stopping, stopped or crashed."""
        self.last_poll: float | None = None
        """When the listener last asked librdkafka for messages (``time.time()``)."""
        self._thread = threading.Thread(
            target=self._run, name=f"conveyor-listener-{name}", daemon=True
        )

    # -- lifecycle (the runner) ---------------------------------------------------------------

    @property
    def group_id(self) -> str:
        """The consumer group (``group.id``) this listener reads in."""
        return self._group_id

    def start(self) -> None:
        if self.direct:  # assigned on the listener's thread: a failure is the listener's crash
            self._direct_start = [(r.name, p) for r in self.routes.values() for p in r.assign or ()]
        else:
            self._client.subscribe(
                list(self.routes), self._on_assign, self._on_revoke, self._on_lost
            )
        self.state = "running"
        self._thread.start()
        if self.context.settings.inline_quick_batches:
            self._timers.call_later(_TAKE_OVER_AFTER / 2, self._watch)

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
        self._thread.join(timeout)

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
        self._run_commands()
        self._commit_marked(sync=True)
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
        self._command(lambda: self._client.pause([(topic, partition)]))

    def resume(self, topic: str, partition: int, then: Callable[[], None] | None = None) -> None:
        """Fetch ``topic``/``partition`` again; ``then`` runs right after, on this thread."""

        def resume_now() -> None:
            self._client.resume([(topic, partition)])
            if then is not None:
                then()

        self._command(resume_now)

    def seek(self, executor: PartitionCore, offset: int) -> None:
        """Continue ``executor``'s partition from ``offset``; what was fetched before is dropped."""

        def seek_now() -> None:
            self._discarding.add(executor)  # what the current poll fetched predates the seek
            executor.discard_pending()
            self._client.seek(executor.topic, executor.partition, offset)

        self._command(seek_now)

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
            if executor is None or (topic, partition) not in self._assigned:
                raise NotAssignedError(f"{topic}/{partition} is not assigned to this process")
            return (action(executor, self),)

        return self._call(run, timeout)  # type: ignore[no-any-return]

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

        offset = self._call(find)
        if offset is None:
            raise KafkaError(f"{self.name}: no offset by time for {topic}/{partition} in time")
        return int(offset)

    def commit_now(
        self, topic: str, partition: int, next_offset: int, metadata: str | None = None
    ) -> bool:
        """Commit ``next_offset`` (with ``metadata``) for the partition and wait; False when
        refused or not done."""
        return bool(self._call(lambda: self._commits.now(topic, partition, next_offset, metadata)))

    def forget_group_metadata(self) -> None:
        """Drop the cached metadata: the next transaction asks librdkafka again."""
        self._group_metadata = None

    def group_metadata(self) -> Any:
        """The group's metadata, for committing offsets inside a producer's transaction: the
        one taken at the last assignment (it changes only with the group's generation), else
        asked of librdkafka on this listener's thread."""
        cached = self._group_metadata
        return cached if cached is not None else self._call(self._client.group_metadata)

    def over_limit(self, executor: PartitionCore) -> None:
        """A partition's backlog passed its high-water mark (called on this thread)."""
        with self._room:
            self._over_limit.add(executor)

    def drained(self, executor: PartitionCore) -> None:
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
        with self._jobs_lock:
            self._running_jobs += 1

    def job_finished(self) -> None:
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
        return set(self._assigned)

    def committed(self) -> dict[Partition, int]:
        """The offsets this listener committed last, per partition (a copy)."""
        return dict(self._commits.offsets)

    def _command(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the listener thread before it hands out the next fetched messages;
        from another thread, its poll's wait ends for it."""
        self._commands.append(action)
        if threading.current_thread() is not self._thread:
            self._client.wake()

    def _call(self, action: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``action`` on the listener thread and wait for its result (woken by a Future).

        Returns ``None`` when the listener does not get to it in time (stopped or stuck).

        On the listener's own thread the action runs at once. A batch on that thread that
        outlives ``_TAKE_OVER_AFTER`` has a successor polling beside it: an action it started
        before the hand-over finishes beside the successor's loop, so such actions must only
        make librdkafka calls (commit, group metadata), never change the listener's state."""
        if threading.current_thread() is self._thread:
            return action()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(action())
            except Exception as exc:
                future.set_exception(exc)

        self._command(run)
        wait = timeout if timeout is not None else self.max_wait_time + 30.0
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            return None

    # -- the loop -----------------------------------------------------------------------------

    def run_here(self, job: Callable[[], None]) -> None:
        """Run a job on this thread (a quick batch), counted as the pool's work. If the job ran
        so long that another thread took over the listener's role meanwhile, this thread ends
        when it returns (:class:`_HandedOver` unwinds it out of the loop)."""
        self._inline_job = job
        self._inline_since = time.monotonic()
        try:
            self._run_here_counted(job)
        finally:
            with self._role:
                handed = self._thread is not threading.current_thread()
                if not handed:  # after a hand-over the record is the successor's
                    self._inline_since = None
                    self._inline_job = None
        if handed:
            raise _HandedOver

    def _watch(self) -> None:
        """On the timers' thread, a few times a second: a batch that has run on the listener's
        thread for ``_TAKE_OVER_AFTER`` gets a new listener thread beside it."""
        if self._stopping.is_set():
            return
        successor = None
        held = 0.0  # seconds the batch has run
        with self._role:
            since, job = self._inline_since, self._inline_job
            if since is not None and (held := time.monotonic() - since) >= _TAKE_OVER_AFTER:
                self._inline_since = None  # one successor per blocked batch
                successor = self._thread = threading.Thread(
                    target=self._run, name=f"conveyor-listener-{self.name}", daemon=True
                )
        if successor is not None:
            executor = getattr(getattr(job, "func", None), "__self__", None)
            where = (
                f"{executor.topic}/{executor.partition}"
                if isinstance(executor, PartitionCore)
                else "a partition"
            )
            _log.info(
                "%s: a batch of %s has run %.1f s on the listener's thread; another thread "
                "polls meanwhile", self.name, where, held,
            )  # fmt: skip
            successor.start()
        self._timers.call_later(_TAKE_OVER_AFTER / 2, self._watch)

    def _run(self) -> None:
        try:
            partitions, self._direct_start = self._direct_start, None
            if partitions is not None and self._start(partitions):
                self._assigned_now(partitions)
            self._loop()
        except _HandedOver:
            return  # another thread holds the listener's role now
        except BaseException as exc:
            self.state = "crashed"
            _log.exception("listener %s crashed", self.name)
            self.context.on_crash(exc, f"listener {self.name}")

    def _loop(self) -> None:
        client = self._client
        poll_batch = client.poll_batch
        monitor = self.context.monitor
        paused_all = False
        while not self._stopping.is_set():
            self._run_commands()
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
            if now >= self._next_commit:
                self._commit_marked(sync=False)
            if self._idle_ticks is not None and now >= self._idle_ticks.next_check:
                self._idle_ticks.check(self._assigned, self._ticking_executor, now)
            if self._over_limit:
                self._wait_for_room()
            # While a partition waits for its backlog to drain, its resume comes as a command:
            # poll in short slices then, so that the command does not wait out a long poll.
            throttled = any(executor.backpressure for executor in self.executors.values())
            wait = _THROTTLED_POLL if throttled else min(self.max_wait_time, _POLL_SLICE)
            batch = poll_batch(wait, self._drain)
            if not batch:
                continue
            if self._commands:
                self._run_commands()
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
        if len(self._assigned) == 1:
            # One partition assigned: the whole poll is its run (librdkafka drops what was
            # fetched for partitions no longer assigned; the ends are checked all the same).
            [(topic, partition)] = self._assigned
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
                self, route, partition, self.context, self._policies[route.name], self._timers,
                topic,
            )  # fmt: skip
            executor.metadata.started_with(self._start_metadata.pop(key, None))
            predecessor = self._retiring.pop(key, None)
            if predecessor is not None:
                executor.follow(predecessor)
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

    def _run_commands(self) -> None:
        commands = self._commands
        while commands:
            action = commands.popleft()
            try:
                action()
            except Exception as exc:
                self._on_error(KafkaError(f"listener command failed: {exc}"))

    # -- rebalances (called inside poll, on this thread) --------------------------------------

    def _on_assign(self, partitions: list[Partition]) -> None:
        """The group assigned ``partitions``: each starts at its committed offset, looked up
        here (see :mod:`conveyor.processing.positions`), never at a guess."""
        if self._start(partitions, incremental=self._incremental):
            self._assigned_now(partitions)

    def _start(self, partitions: list[Partition], incremental: bool = False) -> bool:
        """Assign ``partitions`` at their committed offsets (their metadata awaits executors);
        False when the listener stopped first (the loop ends on the stop; ``close()`` may call
        this on the stopping thread): nothing is assigned."""
        try:
            positions, metadata = self._positions.resolve(partitions, self._group_id)
        except StartAbandoned as stopped:
            _log.info("listener %s: %s", self.name, stopped)
            return False
        for key in partitions:
            self._start_metadata.pop(key, None)
        self._start_metadata.update(metadata)
        self._client.assign(positions, incremental=incremental)
        return True

    def _assigned_now(self, partitions: list[Partition]) -> None:
        self._assigned.update(partitions)
        try:  # a new generation: transactions commit offsets with its metadata
            self._group_metadata = self._client.group_metadata()
        except Exception:  # a direct assignment has no group: asked when needed
            self._group_metadata = None
        monitor = self.context.monitor
        if ev.REBALANCE_PARTITIONS_ASSIGNED in monitor.subscribed:
            monitor.instrument(ev.REBALANCE_PARTITIONS_ASSIGNED, listener=self.name,
                               group=self._group_id, partitions=partitions)  # fmt: skip
        if self.quieted and partitions:
            self._command(lambda: self._client.pause(partitions))

    def _on_revoke(self, partitions: list[Partition]) -> None:
        self._lose(partitions, commit=True)

    def _on_lost(self, partitions: list[Partition]) -> None:
        self._lose(partitions, commit=False)

    def _lose(self, partitions: list[Partition], commit: bool) -> None:
        self._assigned.difference_update(partitions)
        self._group_metadata = None  # the generation moves on
        monitor = self.context.monitor
        if commit:
            self._commit_marked(sync=True, only=set(partitions))  # what was processed until now
        lost = [
            self.executors.pop(partition) for partition in partitions if partition in self.executors
        ]
        for executor in lost:
            if executor.scheduled:  # revoked mid-batch; may come back at once (eager rebalance)
                self._retiring[(executor.topic, executor.partition)] = executor
            executor.revoke()  # later marks of these partitions are refused
            self.drained(executor)
            self._commits.forget((executor.topic, executor.partition))
        if ev.REBALANCE_PARTITIONS_REVOKED in monitor.subscribed:
            monitor.instrument(ev.REBALANCE_PARTITIONS_REVOKED, listener=self.name,
                               group=self._group_id, partitions=partitions)  # fmt: skip

    # -- offsets ------------------------------------------------------------------------------

    def _commit_marked(self, sync: bool, only: set[Partition] | None = None) -> bool:
        """Commit the offsets marked since the last commit (listener thread only)."""
        self._next_commit = time.monotonic() + self._commit_interval
        return self._commits.marked(self.executors, sync, only)
