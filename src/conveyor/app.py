"""``App``: settings, routes, producer and monitor; runs the listeners and the worker pool."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.admin import Admin
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.instrumentation import LoggingListener, Monitor
from conveyor.instrumentation import events as ev
from conveyor.iterator import Iterator
from conveyor.processing.listener import Listener
from conveyor.processing.workers import WorkerPool
from conveyor.producer import Producer
from conveyor.routing import Routes, Topic
from conveyor.validation import check_count, check_seconds

__all__ = ["App", "AppSettings"]

_log = logging.getLogger("conveyor")


@dataclass(frozen=True)
class AppSettings:
    """The app's validated settings (Karafka's defaults where it has them)."""

    client_id: str
    kafka: Mapping[str, Any]
    concurrency: int = 5
    max_messages: int = 100
    max_wait_time: float = 1.0
    shutdown_timeout: float = 60.0
    pause_timeout: float = 1.0
    pause_max_timeout: float = 30.0
    pause_with_exponential_backoff: bool = True


class App:
    """A Conveyor application.

    Args:
        client_id: names this application (librdkafka's ``client.id`` prefix, and the default
            consumer group when ``kafka`` has no ``group.id``).
        kafka: librdkafka settings, passed through (``bootstrap.servers`` is required).
        concurrency: worker threads (default 5).
        max_messages: the most messages one ``consume()`` gets (default 100).
        max_wait_time: seconds a listener waits for the first message of a batch (default 1).
        shutdown_timeout: seconds a graceful stop waits for running batches (default 60).
        pause_timeout, pause_max_timeout, pause_with_exponential_backoff: how long a partition
            waits before retrying a batch whose ``consume()`` raised (1 s doubling up to 30 s).
        monitor: the event bus (a new one with a :class:`LoggingListener` when omitted).

    Raises:
        ConfigurationError: an unknown setting, a wrong type or an impossible value (named).

    Example::

        app = App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:9092"})
        app.routes.topic("orders", OrdersConsumer)
        app.run()
    """

    def __init__(
        self,
        client_id: str = "conveyor",
        kafka: Mapping[str, Any] | None = None,
        *,
        concurrency: int = 5,
        max_messages: int = 100,
        max_wait_time: float = 1.0,
        shutdown_timeout: float = 60.0,
        pause_timeout: float = 1.0,
        pause_max_timeout: float = 30.0,
        pause_with_exponential_backoff: bool = True,
        monitor: Monitor | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            name = sorted(unknown)[0]
            hint = (
                " (librdkafka settings go in kafka={...})" if "." in name or "_" not in name else ""
            )
            raise ConfigurationError(f"App got an unknown setting {name!r}{hint}", name)
        if not isinstance(client_id, str) or not client_id:
            raise ConfigurationError(
                f"client_id must be a non-empty string, got {client_id!r}", "client_id"
            )
        if kafka is None or not isinstance(kafka, Mapping):
            raise ConfigurationError(
                'kafka must be a dict of librdkafka settings with "bootstrap.servers"', "kafka"
            )
        if not kafka.get("bootstrap.servers"):
            raise ConfigurationError('kafka["bootstrap.servers"] is required', "bootstrap.servers")
        check_count("concurrency", concurrency)
        check_count("max_messages", max_messages)
        for name, value in (
            ("max_wait_time", max_wait_time),
            ("shutdown_timeout", shutdown_timeout),
            ("pause_timeout", pause_timeout),
            ("pause_max_timeout", pause_max_timeout),
        ):
            check_seconds(name, value)
        if pause_max_timeout < pause_timeout:
            raise ConfigurationError(
                f"pause_max_timeout ({pause_max_timeout}) must not be below pause_timeout ({pause_timeout})",
                "pause_max_timeout",
            )
        if not isinstance(pause_with_exponential_backoff, bool):
            raise ConfigurationError(
                "pause_with_exponential_backoff must be True or False",
                "pause_with_exponential_backoff",
            )
        self.settings = AppSettings(
            client_id=client_id,
            kafka=dict(kafka),
            concurrency=concurrency,
            max_messages=max_messages,
            max_wait_time=float(max_wait_time),
            shutdown_timeout=float(shutdown_timeout),
            pause_timeout=float(pause_timeout),
            pause_max_timeout=float(pause_max_timeout),
            pause_with_exponential_backoff=pause_with_exponential_backoff,
        )
        if monitor is None:
            monitor = Monitor()
            LoggingListener().attach(monitor)
        self.monitor = monitor
        self.routes = Routes(default_group=str(kafka.get("group.id") or client_id))
        self._producer: Producer | None = None
        self._admin: Admin | None = None
        self._transactional_producer: Producer | None = None
        self._producer_lock = threading.Lock()
        self._stopped = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.listeners: list[Listener] = []
        self._pool: WorkerPool | None = None
        self.crash: BaseException | None = None
        self.state = "idle"

    # -- admin and producer -------------------------------------------------------------------

    @property
    def admin(self) -> Admin:
        """An :class:`~conveyor.admin.Admin` over the app's kafka settings (created on first use)."""
        if self._admin is None:
            self._admin = Admin(
                {k: v for k, v in self.settings.kafka.items() if not _consumer_only(k)}
            )
        return self._admin

    @property
    def producer(self) -> Producer:
        """The app's producer, created on first use with the app's kafka settings and monitor."""
        producer = self._producer
        if producer is None:
            with self._producer_lock:
                if self._producer is None:
                    settings = {
                        k: v for k, v in self.settings.kafka.items() if not _consumer_only(k)
                    }
                    settings.setdefault("client.id", f"{self.settings.client_id}-producer")
                    self._producer = Producer(settings, monitor=self.monitor)
                producer = self._producer
        return producer

    def iterator(self, topics: Mapping[str, Any], **options: Any) -> Iterator:
        """An :class:`~conveyor.iterator.Iterator` with the app's kafka settings."""
        return Iterator(topics, {k: v for k, v in self.settings.kafka.items()}, **options)

    @property
    def transactional_producer(self) -> Producer:
        """A transactional producer for transactional dead letter queues (created on first use)."""
        with self._producer_lock:
            if self._transactional_producer is None:
                settings = {k: v for k, v in self.settings.kafka.items() if not _consumer_only(k)}
                settings["transactional.id"] = f"{self.settings.client_id}-conveyor-{os.getpid()}"
                settings["client.id"] = f"{self.settings.client_id}-transactional-producer"
                self._transactional_producer = Producer(settings, monitor=self.monitor)
            return self._transactional_producer

    # -- running ------------------------------------------------------------------------------

    def run(
        self,
        *,
        consumer_groups: Iterable[str] | None = None,
        subscription_groups: Iterable[str] | None = None,
        topics: Iterable[str] | None = None,
    ) -> None:
        """Consume until :meth:`stop` (from any thread or a signal); the filters narrow the routes.

        Raises:
            ConfigurationError: no route to consume (after the filters).
            ConveyorError: a listener or worker crashed (the app stopped first).
        """
        self.start(
            consumer_groups=consumer_groups, subscription_groups=subscription_groups, topics=topics
        )
        self._stopping.wait()
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
        with self._lock:
            if self.state != "idle":
                raise ConveyorError(f"the app is {self.state}; an App runs once")
            self.state = "starting"
        routes = self._select(consumer_groups, subscription_groups, topics)
        self._pool = WorkerPool(
            self.settings.concurrency, self.settings.client_id, self._worker_crashed
        )
        groups: dict[tuple[str, str, bool, str], list[Topic]] = {}
        for route in routes:
            key = (
                route.consumer_group,
                route.subscription_group,
                route.direct,
                route.initial_offset,
            )
            groups.setdefault(key, []).append(route)
        for (group, subscription, direct, initial), members in groups.items():
            name = subscription if not direct else f"{subscription}-assigned"
            if initial != "earliest":
                name = f"{name}-{initial}"
            self.listeners.append(Listener(self, name, group, members, self._pool.submit))
        for listener in self.listeners:
            listener.start()
        self.state = "running"
        if ev.APP_RUNNING in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_RUNNING, app=self)

    def _select(
        self,
        consumer_groups: Iterable[str] | None,
        subscription_groups: Iterable[str] | None,
        topics: Iterable[str] | None,
    ) -> list[Topic]:
        self.routes.validate()
        chosen = self.routes.active()
        for name, wanted, attribute in (
            ("consumer group", consumer_groups, "consumer_group"),
            ("subscription group", subscription_groups, "subscription_group"),
            ("topic", topics, "name"),
        ):
            if wanted is None:
                continue
            names = set(wanted)
            known = {getattr(route, attribute) for route in self.routes.active()}
            missing = sorted(names - known)
            if missing:
                raise ConfigurationError(
                    f"no route has {name} {missing[0]!r}; known: {', '.join(sorted(known))}",
                    attribute,
                )
            chosen = [route for route in chosen if getattr(route, attribute) in names]
        if not chosen:
            raise ConfigurationError("the filters leave no route to consume", "routes")
        return chosen

    def stop(self) -> None:
        """Begin a graceful stop (safe from any thread and from signal handlers)."""
        if not self._stopping.is_set():
            self._stopping.set()

    def quiet(self) -> None:
        """Finish the batches in flight, take no new ones, keep the group membership."""
        for listener in self.listeners:
            listener.quiet()
        self.state = "quiet"
        if ev.APP_QUIETING in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_QUIETING, app=self)

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
        for listener in self.listeners:
            listener.stop()
        for listener in self.listeners:
            listener.join(max(0.0, deadline - time.monotonic()))
        clean = True
        for listener in self.listeners:
            clean = listener.shut_down(deadline) and clean
        if self._pool is not None:
            clean = self._pool.stop(max(0.1, deadline - time.monotonic())) and clean
        for producer in (self._producer, self._transactional_producer):
            if producer is not None:
                producer.close(max(1.0, deadline - time.monotonic()))
        self.state = "stopped"
        if not clean:
            _log.warning("the app stopped before every running batch finished (shutdown_timeout)")
        if ev.APP_STOPPED in self.monitor.subscribed:
            self.monitor.instrument(ev.APP_STOPPED, app=self, clean=clean and self.crash is None)
        self._stopped.set()

    # -- crashes ------------------------------------------------------------------------------

    def _listener_crashed(self, listener: Listener, error: BaseException) -> None:
        self._crashed(error, f"listener {listener.name}")

    def _worker_crashed(self, error: BaseException) -> None:
        self._crashed(error, "a worker")

    def _crashed(self, error: BaseException, where: str) -> None:
        if self.crash is None:
            self.crash = error
        _log.error("%s crashed (%r); stopping the app", where, error)
        if ev.ERROR_OCCURRED in self.monitor.subscribed:
            self.monitor.instrument(ev.ERROR_OCCURRED, type="app.crash", error=error, where=where)
        self.stop()


_CONSUMER_ONLY_PREFIXES = (
    "group.",
    "auto.offset.reset",
    "enable.auto.",
    "auto.commit.",
    "session.timeout",
    "heartbeat.",
    "max.poll.",
    "partition.assignment",
    "fetch.",
    "isolation.level",
    "enable.partition.eof",
    "queued.",
    "check.crcs",
)


def _consumer_only(name: str) -> bool:
    return name.startswith(_CONSUMER_ONLY_PREFIXES)
