"""``App``: settings, routes, producer and monitor; runs the listeners and the worker pool."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor.app_producers import AppProducers
from conveyor.environment import DEFAULT
from conveyor.errors import ConfigurationError, ConveyorError, NotAssignedError
from conveyor.instrumentation import LoggingListener, Monitor
from conveyor.instrumentation import events as ev
from conveyor.routing import Routes
from conveyor.schedules.wire import RECURRING_TOPIC
from conveyor.settings import AppSettings, producer_settings, settings_from_environment
from conveyor.validation import check_aware

# The features and the engine are imported where the app first uses them (the admin client,
# a feature's first read, start()), so that ``import conveyor`` loads the core alone.
if TYPE_CHECKING:
    from conveyor.admin import Admin
    from conveyor.consumer import Consumer
    from conveyor.iterator import Iterator
    from conveyor.jobs import Job, Jobs
    from conveyor.liveness import Liveness
    from conveyor.metrics import Metrics
    from conveyor.processing import ProcessingContext, Runner
    from conveyor.processing.joint_transaction import JointTransaction
    from conveyor.processing.snapshot import Snapshot
    from conveyor.producer import Producer
    from conveyor.routing.topic import Topic
    from conveyor.schedules.dispatcher import Schedules
    from conveyor.schedules.recurring import RecurringTasks
    from conveyor.state.queries import StoreQueries
    from conveyor.state.space import StateSpace
    from conveyor.tracing import Latency, Tracing
    from conveyor.web import Web

__all__ = ["App", "AppSettings"]

_Feature = TypeVar("_Feature")
_log = logging.getLogger("conveyor")
_PACKING_METADATA_TIMEOUT = 5.0  # seconds start() waits for the partition counts it packs by


class App:
    """A Conveyor application.

    Every setting the code does not give comes from its environment variable, else from its
    default: ``concurrency`` from ``$CONVEYOR_CONCURRENCY``, ``instance_id`` from
    ``$CONVEYOR_INSTANCE_ID`` and so on (the configuration page lists them;
    ``conveyor config`` shows where each setting came from).

    Args:
        client_id: names this application (librdkafka's ``client.id`` prefix, and the default
            consumer group when ``kafka`` has no ``group.id``; default ``"conveyor"``).
        kafka: librdkafka settings, passed through (``bootstrap.servers`` is required); they
            win over the environment's: ``$KAFKA_BOOTSTRAP_SERVERS`` and
            ``$CONVEYOR_KAFKA_<NAME>`` (``CONVEYOR_KAFKA_SASL_PASSWORD`` for
            ``sasl.password``).
        concurrency: worker threads (default 5).
        max_messages: the most messages one ``consume()`` gets (default 100).
        max_wait_time: seconds a listener waits for the first message of a batch (default 1).
        shutdown_timeout: seconds a graceful stop waits for running batches (default 60).
        pause_timeout: seconds a partition waits before retrying a batch whose ``consume()``
            raised (default 1).
        pause_max_timeout: the longest such wait (default 30).
        pause_with_exponential_backoff: double the wait after each failure in a row, up to
            ``pause_max_timeout`` (default True).
        gc_threshold: the garbage collector's first threshold while the app runs (default
            50,000; Python's is 700, which cost a third of the consume throughput here: see
            :mod:`conveyor.processing.collector`); ``None`` leaves the collector alone.
        inline_quick_batches: let a listener run a small batch (up to 16 messages, all its
            poll brought) on its own thread instead of handing it to a worker, once the
            partition's last 8 jobs each took under 0.25 ms (default True): a lone message
            then skips a thread hand-off (~45 us on 2 cores). A ``consume()`` that then
            blocks holds up that listener's polling until it returns (and sends its
            partition back to the pool); ``False`` hands every batch to the pool.
        max_listeners: the most listeners that read the routes of one consumer group
            declared outside any ``subscription_group`` block (default 2). A listener is a
            thread with its own librdkafka consumer; those routes' topics are spread over
            up to this many listeners of the group, evenly by partition count (taken from
            the cluster's metadata at start), each a subscription group of its own named
            ``<group>-pack-<n>``. 1 reads them all with one listener. Routes in a declared
            subscription group keep theirs. See the consuming guide.
        monitor: the event bus (a new one with a :class:`LoggingListener` when omitted).
        oauth_token_provider: with ``sasl.mechanism=OAUTHBEARER``, a callable returning
            ``(token, expiry)`` or an ``OAuthToken`` (with principal name and SASL extensions),
            called by every client the app makes (producers, consumers, admin, iterators, RPC
            clients, the web UI's) for its first token and again before each one expires.
        instance_id: this process's stable name among the app's processes, in its
            transactional producer's ``transactional.id`` (default: the host's name and the
            process's slot on the host), so that a restarted process fences its predecessor's
            open transaction at once.
        event_loop_blocked_after: seconds one callback may hold the app's event loop, where
            the lanes of ``async def consume()`` on routes with virtual partitions run
            together, before an ``event_loop.blocked`` event names the lane holding it (a
            blocking call there stalls every other lane); ``None`` does not watch (default
            0.25).
        state_dir: the folder of the routes' state stores (default ``state``, in the working
            directory); see the state guide.
        state_flush_interval: seconds a partition's store writes may wait, with its offsets,
            before they go to the changelogs and the local stores together (default 1.0; 0
            writes each batch's at its end); see the state guide.
        transaction_interval: seconds one Kafka transaction stays open for the consumers'
            ``with self.transaction():`` blocks to join, committed together when it is over
            (default 0: each block commits at its end); see "Exactly once".

    Raises:
        ConfigurationError: an unknown setting, a wrong type or an impossible value (named).

    Example::

        app = App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:9092"})
        app.routes.topic("orders", OrdersConsumer)
        app.run()
    """

    def __init__(
        self,
        client_id: str = DEFAULT,
        kafka: Mapping[str, Any] | None = None,
        *,
        concurrency: int = DEFAULT,
        max_messages: int = DEFAULT,
        max_wait_time: float = DEFAULT,
        shutdown_timeout: float = DEFAULT,
        pause_timeout: float = DEFAULT,
        pause_max_timeout: float = DEFAULT,
        pause_with_exponential_backoff: bool = DEFAULT,
        gc_threshold: int | None = DEFAULT,
        inline_quick_batches: bool = DEFAULT,
        max_listeners: int = DEFAULT,
        monitor: Monitor | None = None,
        oauth_token_provider: Callable[[], tuple[Any, ...]] | None = None,
        instance_id: str | None = DEFAULT,
        event_loop_blocked_after: float | None = DEFAULT,
        state_dir: str | os.PathLike[str] = DEFAULT,
        state_flush_interval: float = DEFAULT,
        transaction_interval: float = DEFAULT,
        **unknown: Any,
    ) -> None:
        self.settings = settings_from_environment(
            {
                "client_id": client_id,
                "concurrency": concurrency,
                "max_messages": max_messages,
                "max_wait_time": max_wait_time,
                "shutdown_timeout": shutdown_timeout,
                "pause_timeout": pause_timeout,
                "pause_max_timeout": pause_max_timeout,
                "pause_with_exponential_backoff": pause_with_exponential_backoff,
                "gc_threshold": gc_threshold,
                "inline_quick_batches": inline_quick_batches,
                "max_listeners": max_listeners,
                "instance_id": instance_id,
                "event_loop_blocked_after": event_loop_blocked_after,
                "state_dir": state_dir,
                "state_flush_interval": state_flush_interval,
                "transaction_interval": transaction_interval,
            },
            kafka,
            oauth_token_provider=oauth_token_provider,
            unknown=unknown,
        )
        self._logging: LoggingListener | None = None
        if monitor is None:
            monitor = Monitor()
            self._logging = LoggingListener()
            self._logging.attach(monitor)
        self.monitor = monitor
        self.routes = Routes(
            default_group=str(self.settings.kafka.get("group.id") or self.settings.client_id)
        )
        self._producers = AppProducers(self.settings, self.monitor, self.routes.default_group)
        self._admin: Admin | None = None
        self._stopped = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._runner: Runner | None = None
        self._space: StateSpace | None = None  # the stores of the run, while it runs
        self._started_at: float | None = None
        self.crash: BaseException | None = None
        self.state = "idle"
        self._closing_hooks: list[Callable[[], None]] = []
        self._recurring: RecurringTasks | None = None

    # -- features, each made when first read ----------------------------------------------------

    @cached_property
    def tracing(self) -> Tracing:
        """OpenTelemetry tracing: ``app.tracing.enable()`` (extra ``conveyor[otel]``)."""
        from conveyor.tracing import Tracing

        return self._feature(
            "tracing", lambda: self._producers.hook("tracing", Tracing(self.monitor))
        )

    @cached_property
    def latency(self) -> Latency:
        """Per-stage latency histograms: ``app.latency.enable()``, ``app.latency.snapshot()``."""
        from conveyor.tracing import Latency

        return self._feature(
            "latency", lambda: self._producers.hook("latency", Latency(self.monitor))
        )

    @cached_property
    def metrics(self) -> Metrics:
        """Prometheus metrics: ``app.metrics.enable()``, ``app.metrics.serve(9464)``."""
        from conveyor.metrics import Metrics

        return self._feature("metrics", lambda: Metrics(self))

    @cached_property
    def web(self) -> Web:
        """The web UI's side of the app: ``app.web.enable()`` turns reporting on."""
        from conveyor.web import Web

        # Read first, so that no feature is read under the lock that makes them.
        metrics, latency = self.metrics, self.latency
        return self._feature("web", lambda: Web(self, metrics=metrics, latency=latency))

    @cached_property
    def schedules(self) -> Schedules:
        """Scheduled messages: ``app.schedules.enable()`` dispatches ``producer.produce_at``."""
        from conveyor.schedules.dispatcher import Schedules

        return self._feature(
            "schedules", lambda: self._producers.hook("schedules", Schedules(self))
        )

    @cached_property
    def jobs(self) -> Jobs:
        """Background jobs: ``@app.job(...)`` makes a function one (see :meth:`job`)."""
        from conveyor.jobs import Jobs

        return self._feature("jobs", lambda: Jobs(self))

    @cached_property
    def stores(self) -> StoreQueries:
        """Interactive queries: ``app.stores.get(store, key)``, here or where it is."""
        from conveyor.state.queries import StoreQueries

        return self._feature(
            "stores", lambda: StoreQueries(self, lambda: self._space, self._partition_command)
        )

    @cached_property
    def liveness(self) -> Liveness:
        """``GET /healthz`` for orchestrators: ``app.liveness.serve(9091)``, ``check()``."""
        from conveyor.liveness import Liveness

        return self._feature("liveness", lambda: Liveness(self))

    def _feature(self, name: str, make: Callable[[], _Feature]) -> _Feature:
        """The feature ``name``: made by ``make()`` unless another thread just made it (a
        ``cached_property`` alone may run twice), under the lock that makes producers."""
        with self._producers.lock:
            feature: _Feature | None = self.__dict__.get(name)
            if feature is None:
                feature = self.__dict__[name] = make()
            return feature

    def job(
        self,
        *,
        name: str | None = None,
        queue: str = "default",
        retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        timeout: float | None = None,
    ) -> Callable[[Callable[..., Any]], Job[Any, Any]]:
        """Make the decorated function a background job of ``queue`` (a topic the app reads):
        ``job.enqueue(*args, key=..., **kwargs)`` sends it, ``enqueue_in`` / ``enqueue_at``
        later; ``retries`` attempts more after a failure, ``backoff`` seconds doubling up to
        ``max_backoff`` apart (the partition goes on meanwhile), then the dead-job topic;
        ``timeout`` cancels an ``async def`` job that runs longer. See the jobs guide.

        Raises:
            ConfigurationError: a bad setting, or a job name used twice.
        """
        return self.jobs.job(
            name=name,
            queue=queue,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            timeout=timeout,
        )

    def recurring(
        self,
        cron: str,
        task: Callable[[], Any],
        *,
        name: str | None = None,
        topic: str = RECURRING_TOPIC,
    ) -> None:
        """Run ``task()`` on the ``cron`` schedule (five fields, or six with seconds first;
        UTC) once per slot across every process of the app's consumer group: the process
        that owns the one partition of ``topic`` runs it, on a thread of its own. Call before
        ``app.run()``; the first call declares ``topic`` as a route.

        Raises:
            ConfigurationError: a malformed cron expression, a task that is not callable, a
                name used twice, or another topic than the first call's.
        """
        if self._recurring is None:
            from conveyor.schedules.recurring import RecurringTasks

            self._recurring = RecurringTasks(self, topic)
            self.schedules.exclude(topic)  # a record there steers the app: no schedule goes
        elif self._recurring.topic != topic:
            raise ConfigurationError(
                f"recurring tasks already use the topic {self._recurring.topic!r}", "topic"
            )
        self._recurring.add(cron, task, name)

    @property
    def recurring_tasks(self) -> RecurringTasks | None:
        """The app's recurring tasks: topic, tasks, runs read (``None`` before :meth:`recurring`)."""
        return self._recurring

    # -- admin and producer -------------------------------------------------------------------

    @property
    def admin(self) -> Admin:
        """An :class:`~conveyor.admin.Admin` over the app's kafka settings (created on first use)."""
        if self._admin is None:
            from conveyor.admin import Admin

            self._admin = Admin(producer_settings(self.settings.kafka))
        return self._admin

    @property
    def producer(self) -> Producer:
        """The app's producer, created on first use with the app's kafka settings and monitor."""
        producer = self._producers.plain
        return producer if producer is not None else self._producers.producer()

    def make_producers_with(self, factory: Callable[..., Producer]) -> None:
        """From now on make the app's producers with ``factory(settings, monitor=...)``
        (``conveyor.testing`` captures this way). Producers made before are closed at once
        (what they queued is not sent) and made again, by ``factory``, at their next use."""
        self._producers.make_with(factory)

    def iterator(self, topics: Mapping[str, Any], **options: Any) -> Iterator:
        """An :class:`~conveyor.iterator.Iterator` with the app's kafka settings."""
        from conveyor.iterator import Iterator

        options.setdefault("monitor", self.monitor)
        return Iterator(topics, dict(self.settings.kafka), **options)

    @property
    def transactional_id(self) -> str:
        """The ``transactional.id`` of this process's transactional producer: unique among the
        app's live processes and the same for a process restarted in its place (the
        ``instance_id`` setting, else the host name and the process's slot on the host: see
        :mod:`conveyor.slots`), so that a restart fences what a crashed process left open."""
        return self._producers.transactional_id()

    @property
    def transactional_producer(self) -> Producer:
        """A transactional producer (created on first use): for consume-transform-produce
        transactions (``with self.transaction():`` in a consumer) and transactional dead
        letter queues."""
        return self._producers.transactional_producer()

    # -- running ------------------------------------------------------------------------------

    def run(
        self,
        *,
        consumer_groups: Iterable[str] | None = None,
        subscription_groups: Iterable[str] | None = None,
        topics: Iterable[str] | None = None,
    ) -> None:
        """Consume until :meth:`stop` (any thread, a signal) or Ctrl-C; filters narrow the routes.

        Raises:
            ConfigurationError: no route to consume (after the filters).
            ConveyorError: a listener or worker crashed (the app stopped first).
            KeyboardInterrupt: Ctrl-C, once the app stopped gracefully.
        """
        try:
            self.start(
                consumer_groups=consumer_groups,
                subscription_groups=subscription_groups,
                topics=topics,
            )
            while not self._stopping.wait(1.0):  # a Ctrl-C that another thread took shows here
                pass
        except KeyboardInterrupt:  # a script's Ctrl-C: the same graceful stop as stop()
            self._stopping.set()
            self._shut_down()
            raise
        self._shut_down()
        if self.crash is not None:
            raise ConveyorError(
                f"the app stopped because a thread crashed: {self.crash!r}"
            ) from self.crash

    def start(
        self,
        *,
        consumer_groups: Iterable[str] | None = None,
        subscription_groups: Iterable[str] | None = None,
        topics: Iterable[str] | None = None,
    ) -> None:
        """Start the listeners and workers and return (``run`` = ``start`` + wait + stop)."""
        from conveyor.connect.lifecycle import open_sinks
        from conveyor.processing import Runner
        from conveyor.routing.packing import pack_routes
        from conveyor.routing.selection import select_routes

        with self._lock:
            if self.state != "idle":
                raise ConveyorError(f"the app is {self.state}; an App runs once")
            self.state = "starting"
        try:
            routes = pack_routes(
                select_routes(
                    self.routes, self.settings.kafka, consumer_groups, subscription_groups, topics
                ),
                self.settings.max_listeners,
                str(self.settings.kafka.get("auto.offset.reset", "earliest")),
                self._partition_counts,
                static_member="group.instance.id" in self.settings.kafka,
            )
            self._runner = Runner(self._processing_context(routes), routes)
        except BaseException:
            self.state = "idle"
            raise
        self._started_at = time.time()
        if self._logging is not None:  # logging may have been set up since the app was built
            self._logging.refresh()
        try:
            open_sinks(self.routes.sinks, {route.name for route in routes}, self._runner.event_loop)
        except BaseException:  # a sink that cannot open: nothing runs
            self._runner.discard()
            self._runner = None
            self.state = "idle"
            raise
        self._producers.fence_predecessor()
        self._runner.start()
        self.state = "running"
        if ev.APP_RUNNING in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_RUNNING, app=self)

    def _partition_counts(self, own: Mapping[str, Any]) -> Mapping[str, int]:
        """Every topic's partition count, for packing routes over listeners: on the app's
        cluster, or on the one of routes with settings ``own``. Bounded: with no answer in
        time the routes are packed by their declared partitions (a warning says so)."""
        from conveyor.admin import Admin

        settings = producer_settings({**self.settings.kafka, **own})
        try:
            with Admin(settings, timeout=_PACKING_METADATA_TIMEOUT) as admin:
                return admin.partition_counts()
        except ConveyorError as exc:
            _log.warning(
                "no topic metadata to pack listeners by (%s): packing by declared partitions", exc
            )
            return {}

    def stop(self) -> None:
        """Begin a graceful stop (safe from any thread and from signal handlers)."""
        if not self._stopping.is_set():
            self._stopping.set()

    def quiet(self) -> None:
        """Finish the batches in flight, take no new ones, keep the group membership."""
        if self._runner is not None:
            self._runner.quiet()
        self.state = "quiet"
        if ev.APP_QUIETING in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_QUIETING, app=self)

    # -- steering one partition (the web UI's and `conveyor ctl`'s commands) --------------------

    def pause(
        self, topic: str, partition: int, *, until: datetime | None = None, group: str | None = None
    ) -> None:
        """Stop processing ``topic``/``partition`` in this process (it stays assigned): until
        the aware datetime ``until``, or until :meth:`resume`. It goes on from the message
        after the last one marked as consumed. ``group`` picks the consumer group when more
        than one of this app's groups reads the topic (default: the first that has it).

        Raises:
            NotAssignedError: this process does not have the partition.
            ConfigurationError: ``until`` is not an aware datetime.
        """
        timeout = None
        if until is not None:
            timeout = max(0.0, check_aware("until", until).timestamp() - time.time())
        self._partition_command(
            topic,
            partition,
            lambda executor, _listener: executor.request_pause(None, timeout),
            group,
        )

    def resume(self, topic: str, partition: int, *, group: str | None = None) -> None:
        """Resume a partition paused by :meth:`pause` (or by a consumer's ``pause()``).

        Raises:
            NotAssignedError: this process does not have the partition.
        """
        self._partition_command(
            topic, partition, lambda executor, _listener: executor.request_resume(), group
        )

    def seek(
        self, topic: str, partition: int, to: int | datetime, *, group: str | None = None
    ) -> int:
        """Continue ``topic``/``partition`` from offset ``to``, or from the first message at
        or after the aware datetime ``to``; what was fetched and not yet processed is
        dropped. The owning process seeks, so the group may stay active. Returns the offset.

        Raises:
            NotAssignedError: this process does not have the partition.
            ConfigurationError: ``to`` is negative, past the partition's end, or a naive
                datetime.
        """
        when: float | None = None
        wanted = -1
        if isinstance(to, datetime):
            when = check_aware("to", to).timestamp()
        elif isinstance(to, int) and not isinstance(to, bool) and to >= 0:
            wanted = to
        else:
            raise ConfigurationError(f"seek needs an offset >= 0 or a datetime, not {to!r}", "to")

        def seek(executor: Any, listener: Any) -> int:
            if when is not None:
                offset = int(listener.offset_for_time(topic, partition, when))
            else:
                high = listener.high_watermark(topic, partition)
                if wanted > high:
                    raise ConfigurationError(
                        f"offset {wanted} is past the end of {topic}/{partition} (next offset: "
                        f"{high})",
                        "to",
                    )
                offset = wanted
            executor.request_seek(offset)
            return offset

        return int(self._partition_command(topic, partition, seek, group))

    def _partition_command(
        self, topic: str, partition: int, action: Any, group: str | None = None
    ) -> Any:
        runner = self._runner
        if runner is None or self.state not in ("running", "quiet"):
            raise NotAssignedError(f"{topic}/{partition}: the app is not running ({self.state})")
        return runner.on_partition(topic, partition, action, group=group)

    def stop_and_wait(self) -> None:
        """For apps started with :meth:`start`: stop gracefully and return once stopped."""
        self.stop()
        self._shut_down()

    def _shut_down(self) -> None:
        with self._lock:
            if self.state in ("stopping", "stopped"):
                pass_through = True
            else:
                pass_through = False
                self.state = "stopping"
        if pass_through:
            self._stopped.wait()
            return
        if ev.APP_STOPPING in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_STOPPING, app=self)
        deadline = time.monotonic() + self.settings.shutdown_timeout
        clean = True
        if self._runner is not None:
            from conveyor.connect.lifecycle import close_sinks  # loaded by start() already

            clean = self._runner.shut_down(
                deadline, lambda event_loop: close_sinks(self.routes.sinks, event_loop)
            )
        for hook in self._closing_hooks:
            try:
                hook()
            except Exception:
                _log.exception("a closing hook failed (%r)", hook)
        self._producers.close(deadline)
        self.state = "stopped"
        if not clean:
            _log.warning("the app stopped before every running batch finished (shutdown_timeout)")
        if ev.APP_STOPPED in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_STOPPED, app=self, clean=clean and self.crash is None)
        self._stopped.set()

    def add_closing_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` when the app stops, after its consumers stopped and before its
        producers close (the web UI sends its last report there)."""
        self._closing_hooks.append(hook)

    # -- reading the engine --------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """A read-only picture of the running engine, safe to take from any thread at any
        moment: the process, each listener, each assigned partition (offsets, lag, paused,
        retrying), each running job and the worker pool's usage."""
        from conveyor.processing.snapshot import ProcessState, Snapshot
        from conveyor.swarm.supervisor import NODE_ENV, SUPERVISOR_ENV

        runner = self._runner
        node, supervisor = os.environ.get(NODE_ENV), os.environ.get(SUPERVISOR_ENV)
        process = ProcessState(
            pid=os.getpid(),
            hostname=socket.gethostname(),
            started_at=self._started_at,
            state=self.state,
            swarm_node=int(node) if node and node.isdigit() else None,
            swarm_supervisor=int(supervisor) if supervisor and supervisor.isdigit() else None,
        )
        if runner is None:
            return Snapshot(time.time(), process, (), (), (), None)
        partitions, jobs = runner.partition_states()
        return Snapshot(
            taken_at=time.time(),
            process=process,
            listeners=tuple(runner.listener_states()),
            partitions=tuple(partitions),
            jobs=tuple(jobs),
            pool=runner.pool_state(),
        )

    # -- processing ---------------------------------------------------------------------------

    def _processing_context(self, routes: list[Topic]) -> ProcessingContext:
        from conveyor.processing import ProcessingContext

        return ProcessingContext(
            settings=self.settings,
            monitor=self.monitor,
            producer=lambda: self.producer,
            transactional_producer=lambda: self.transactional_producer,
            on_crash=self._crashed,
            prepare_consumer=self._prepare_consumer,
            tracing=self.tracing,
            latency=self.latency,
            stores=self._state_space(routes),
            joint_transaction=self._joint_transaction(),
        )

    def _joint_transaction(self) -> JointTransaction | None:
        """The transaction consumers' blocks join (``transaction_interval``), if set."""
        interval = self.settings.transaction_interval
        if not interval:
            return None
        from conveyor.processing.joint_transaction import JointTransaction
        from conveyor.processing.timers import Timers

        timers = Timers(f"{self.settings.client_id}-transactions")
        return JointTransaction(lambda: self.transactional_producer, interval, timers)

    def _state_space(self, routes: list[Topic]) -> StateSpace | None:
        """The stores of the routes this process runs, when one declares any (closed at
        stop); their missing changelogs are created now."""
        routes = [route for route in routes if route.state]
        if not routes:
            return None
        from conveyor.state.changelogs import ensure_changelogs
        from conveyor.state.space import StateSpace

        created = ensure_changelogs(self.admin, routes)
        if created:
            _log.info("created the stores' changelogs: %s", ", ".join(created))
        space = StateSpace(
            self.settings.state_dir, self.settings.kafka, self.settings.client_id, self.monitor
        )
        self.add_closing_hook(space.close)
        self._space = space
        return space

    def _prepare_consumer(self, consumer: Consumer) -> None:
        consumer.app = self

    def _crashed(self, error: BaseException, where: str) -> None:
        """The one crash path: a listener or a worker failed; stop the app."""
        if self.crash is None:
            self.crash = error
        _log.error("%s crashed (%r); stopping the app", where, error)
        if ev.ERROR_OCCURRED in self.monitor.subscribed:
            self.monitor.instrument(ev.ERROR_OCCURRED, type="app.crash", error=error, where=where)
        self.stop()
