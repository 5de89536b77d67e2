"""``Producer``: synchronous and asynchronous produce at the speed of librdkafka.

A produce call checks the message, hands it to librdkafka and returns a handle that
the client's poller thread completes the moment the broker acknowledges it;
``produce_sync`` waits on that handle. Nothing on these paths sleeps: a full local
queue is waited out on a condition that delivery reports signal.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime
from types import TracebackType
from typing import Any

from conveyor.driver import AcknowledgedHandle, DeliveryHandle
from conveyor.driver.explainer import EXPLAINED_WITHIN
from conveyor.driver.poller import SERVE_SLICE
from conveyor.driver.producers import PURGED, ProducerClient
from conveyor.errors import ConfigurationError, DeliveryError
from conveyor.instrumentation import LoggingListener, Monitor
from conveyor.instrumentation import events as ev
from conveyor.instrumentation.connection import connection_reporter
from conveyor.producer.messages import encode_payload
from conveyor.producer.produce_calls import ProduceCalls
from conveyor.producer.send_hooks import SendHook
from conveyor.producer.send_path import CLOSED, FORKED, OPEN, SendPath
from conveyor.producer.settings import (
    VARIANT_SETTINGS,
    Middleware,
    ProducerSettings,
    build_settings,
)
from conveyor.producer.transactions import Transactions
from conveyor.producer.variants import Variant
from conveyor.schedules.wire import DEFAULT_TOPIC, cancel_message, schedule_message
from conveyor.serialization import Serializer

__all__ = ["MESSAGE_TIMEOUT_MARGIN", "Producer", "SendHook", "Variant"]

# librdkafka fails an expired message on a scan that runs once a second (of what is queued,
# and of requests in flight, whose timeout is their first message's): its report comes up to a
# second after message.timeout.ms. It is served within a poll slice, and one that timed out is
# explained first (within EXPLAINED_WITHIN); another second leaves a loaded machine's scheduling
# some room. Past that margin a caller without a deadline of its own is told WaitTimeoutError,
# which only a report that never comes (a librdkafka that hangs) should ever cause.
_EXPIRY_SCAN = 1.0
_SCHEDULING = 1.0
MESSAGE_TIMEOUT_MARGIN = _EXPIRY_SCAN + SERVE_SLICE + EXPLAINED_WITHIN + _SCHEDULING
"""Seconds past ``message.timeout.ms`` by which a ``produce_sync`` without a ``timeout`` (and
without the producer's ``wait_timeout``) has returned or raised (2.7 s)."""
_NO_DEADLINE = 365 * 24 * 3600.0


_live_send_paths: weakref.WeakSet[SendPath] = weakref.WeakSet()
"""The send paths of the producers not closed yet (a forked child marks them unusable)."""


def _after_fork_in_child() -> None:
    for path in list(_live_send_paths):
        path.state = FORKED


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Producer(ProduceCalls):
    """Conveyor's producer (WaterDrop's role): produce_sync, produce_async, bursts, transactions.

    Args:
        kafka: librdkafka settings, names as librdkafka spells them. Conveyor sets
            ``acks=all``, ``enable.idempotence=true`` and ``linger.ms=0`` unless given.
            ``transactional.id`` makes the producer transactional.
        monitor: the event bus to report to (a new one with a :class:`LoggingListener` if omitted).
        id: a name for this producer in events and logs (default: ``client.id``).
        wait_timeout: default seconds for ``produce_sync`` and ``produce_many_sync`` to wait
            for acknowledgements (``None``: until librdkafka reports, bounded by ``message.timeout.ms``).
        queue_full_timeout: seconds to wait for room when librdkafka's local queue is full.
        reload_on_fatal_error: rebuild the client after a fatal error (idempotence or fencing)
            instead of failing every later call; at most ``max_reloads`` times in a row, waiting
            ``reload_backoff`` seconds (doubling) before each. A client that has run
            :attr:`reload_calm` seconds (5 minutes) since the last rebuild earns the whole
            budget back, so a long-lived producer fenced now and then never runs out of it.
        max_reloads: rebuilds in a row before a fatal error is raised to the caller.
        reload_backoff: seconds before the first rebuild (doubling for each in a row, up to
            30).
        serializer: turns payloads that are not bytes, str or None into bytes (JSON by default).
        middleware: callables applied in order to each message dict before dispatch; each
            returns the message (or ``None`` to keep it as changed in place) or raises to reject it.
        oauth_token_provider: with ``sasl.mechanism=OAUTHBEARER``, a callable returning
            ``(token, expiry)`` (expiry: an aware ``datetime`` or seconds since the epoch), as
            ``App(oauth_token_provider=)`` takes it (WaterDrop's ``oauth.token_provider_listener``):
            called for the first token while the producer is built, and again before each
            token expires (librdkafka asks at 80 % of its lifetime).

    Example::

        producer = Producer({"bootstrap.servers": "127.0.0.1:9092"})
        report = producer.produce_sync(topic="orders", payload={"id": 1}, key="customer-7")
        producer.close()

    Raises:
        ConfigurationError: a setting is wrong (the message names it), such as an
            ``oauth_token_provider`` without ``sasl.mechanism=OAUTHBEARER``, beside an
            ``oauth_cb``, or one that returned something other than ``(token, expiry)``.
    """

    reload_calm: float = 300.0
    """Seconds a rebuilt client runs without a fatal error before ``max_reloads`` refills."""
    schedules_topic: str = DEFAULT_TOPIC
    """Where :meth:`produce_at` and :meth:`cancel_scheduled` write when given no
    ``schedules_topic``: ``conveyor_schedules``, and for an app's producers the app's own
    schedules topic (``app.schedules.topic``)."""

    def __init__(
        self,
        kafka: Mapping[str, Any] | None = None,
        *,
        monitor: Monitor | None = None,
        id: str | None = None,
        wait_timeout: float | None = None,
        queue_full_timeout: float = 10.0,
        reload_on_fatal_error: bool = True,
        max_reloads: int = 10,
        reload_backoff: float = 1.0,
        serializer: Serializer | None = None,
        middleware: Sequence[Middleware] = (),
        oauth_token_provider: Callable[[], tuple[Any, ...]] | None = None,
    ) -> None:
        self.settings: ProducerSettings = build_settings(
            kafka,
            id=id,
            wait_timeout=wait_timeout,
            queue_full_timeout=queue_full_timeout,
            reload_on_fatal_error=reload_on_fatal_error,
            max_reloads=max_reloads,
            reload_backoff=reload_backoff,
            serializer=serializer,
            middleware=middleware,
            oauth_token_provider=oauth_token_provider,
        )
        self.id = self.settings.id
        if monitor is None:
            monitor = Monitor()
            LoggingListener().attach(monitor)
        self.monitor = monitor
        self._lock = threading.Lock()
        wait = self.settings.wait_timeout
        # librdkafka reports every message within message.timeout.ms and a second: a call
        # waits for that report, MESSAGE_TIMEOUT_MARGIN at most past the setting.
        timeout = self.settings.message_timeout
        if wait is None and timeout == 0:  # message.timeout.ms=0: librdkafka waits forever
            wait = _NO_DEADLINE
        self._closing = threading.Event()
        self._reloads = 0
        self._last_reload = -math.inf  # never yet
        self._undelivered = 0
        self._variants: dict[frozenset[tuple[str, Any]], ProducerClient] = {}
        self.transactions = Transactions(
            self.settings.transactional,
            self._active_client,
            self.monitor,
            self.id,
            self._report_error,
        )
        self._send_path = SendPath(
            self.settings,
            self.monitor,
            self.id,
            self.transactions,
            default_wait=wait if wait is not None else timeout + MESSAGE_TIMEOUT_MARGIN,
            replace_failed=self._replace_failed,
            explain=self._explain,
        )
        self._client = self._new_client(self.settings.kafka, f"conveyor-producer-{self.id}")
        _live_send_paths.add(self._send_path)

    @property
    def middleware(self) -> list[Middleware]:
        """The middleware chain; may be changed (append, insert) while the producer runs."""
        return self._send_path.middleware

    @middleware.setter
    def middleware(self, chain: list[Middleware]) -> None:
        self._send_path.middleware = chain

    # -- views --------------------------------------------------------------------------------

    def variant(self, **settings: Any) -> Variant:
        """A view that produces with other per-topic librdkafka settings, e.g. ``variant(acks=1)``.

        Settings use librdkafka's names with ``_`` for ``.`` (``message_timeout_ms=5000``) or
        are passed as a dict via ``variant(**{"compression.type": "zstd"})``. Allowed:
        ``acks``, ``request.timeout.ms``, ``message.timeout.ms``, ``compression.type``,
        ``compression.level``, ``partitioner``, ``linger.ms``, ``enable.idempotence``.

        confluent-kafka exposes no per-topic handles, so variants with the same settings share
        one extra librdkafka client, built on first use and closed with the producer.

        Raises:
            ConfigurationError: an unknown setting, or a transactional producer.
        """
        path = self._send_path
        if path.state is not OPEN:
            path.raise_unusable()
        overrides = {name.replace("_", "."): value for name, value in settings.items()}
        unknown = sorted(set(overrides) - VARIANT_SETTINGS)
        if unknown:
            raise ConfigurationError(
                f"a variant cannot change {', '.join(unknown)}; it may change {', '.join(sorted(VARIANT_SETTINGS))}",
                unknown[0],
            )
        if self.transactions.enabled:
            raise ConfigurationError(
                "variants of a transactional producer are not supported (each would need its own transactional.id)",
                "transactional.id",
            )
        config = {**self.settings.kafka, **overrides}
        acks = str(config.get("acks", config.get("request.required.acks")))
        if acks in ("0", "1") and "enable.idempotence" not in overrides:
            config["enable.idempotence"] = False
        key = frozenset((name, str(value)) for name, value in overrides.items())
        with self._lock:
            client = self._variants.get(key)
            if client is None:
                client = self._new_client(
                    config, f"conveyor-producer-{self.id}-variant-{len(self._variants) + 1}"
                )
                self._variants[key] = client
        return Variant(path, client, overrides)

    # -- send hooks ---------------------------------------------------------------------------

    def add_send_hook(self, hook: SendHook) -> None:
        """Let ``hook`` add headers to every message sent from now on and hear of its delivery
        (tracing and latency stamps use this). Adding a hook twice adds it once."""
        path = self._send_path
        with self._lock:
            if hook not in path.send_hooks:
                path.send_hooks = (*path.send_hooks, hook)

    def remove_send_hook(self, hook: SendHook) -> None:
        """Stop running ``hook`` on the messages sent from now on."""
        path = self._send_path
        with self._lock:
            path.send_hooks = tuple(item for item in path.send_hooks if item is not hook)

    # -- scheduled messages -------------------------------------------------------------------

    def produce_at(
        self,
        when: datetime | float,
        *,
        topic: str,
        payload: Any = None,
        key: str | bytes | None = None,
        headers: Any = None,
        partition: int | None = None,
        id: str | None = None,
        schedules_topic: str | None = None,
    ) -> str:
        """Send a message to ``topic`` at ``when`` (an aware datetime or epoch seconds), through
        the schedules topic that an app with ``app.schedules.enable()`` dispatches; returns the
        schedule's id (``id``, or a new one), for :meth:`cancel_scheduled`. A second schedule
        with the same id replaces the first. Returns once the schedule is stored.
        ``schedules_topic`` defaults to :attr:`schedules_topic` (an app's producer: the app's).

        Raises:
            ConfigurationError: a naive datetime, no topic, or a ``conveyor-schedule-*`` header.
            DeliveryError: the schedules topic did not take it.
        """
        path = self._send_path
        if path.middleware:  # the target topic's middleware (a schema serializer, say) now
            shaped = path.apply_middleware(
                {"topic": topic, "payload": payload, "key": key, "headers": headers}
            )
            payload, key, headers = shaped.get("payload"), shaped.get("key"), shaped.get("headers")
        if payload is not None and not isinstance(payload, bytes):
            payload = encode_payload(payload, path.serializer, path.max_bytes)
        schedule_id, message = schedule_message(
            when,
            topic=topic,
            payload=payload,
            key=key,
            headers=headers,
            partition=partition,
            id=id,
            schedules_topic=schedules_topic or self.schedules_topic,
        )
        self.produce_sync(**message)
        return schedule_id

    def cancel_scheduled(self, schedule_id: str, schedules_topic: str | None = None) -> None:
        """Cancel a scheduled message (a no-op if it was sent already). Returns once the
        cancellation is stored."""
        self.produce_sync(**cancel_message(schedule_id, schedules_topic or self.schedules_topic))

    # -- transactions -------------------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[Transactions]:
        """``with producer.transaction():`` commits at the end of the block, aborts if it raises.

        Every produce inside the block belongs to the transaction (and a produce outside any
        block runs in a transaction of its own). Other threads' produces wait until the block
        ends. Requires ``kafka["transactional.id"]``.

        Raises:
            TransactionError: not transactional, nested use, the block would wait on its own
                event loop for a transaction another task of that loop holds (use
                :meth:`transaction_async` there), or the broker refused.
        """
        return self.transactions.transaction()

    def transaction_async(self) -> AbstractAsyncContextManager[Transactions]:
        """``async with producer.transaction_async():`` in a coroutine: the same transaction,
        the block being its task's alone (other tasks of the loop that produce meanwhile do
        not join it). Waiting for another block to end, beginning, committing and aborting
        run on a thread, so the event loop keeps running meanwhile.

        Raises:
            TransactionError: not transactional, nested use, or the broker refused.
        """
        return self.transactions.transaction_async()

    # -- closing ------------------------------------------------------------------------------

    def flush(self, timeout: float = 30.0) -> int:
        """Wait up to ``timeout`` seconds for every queued message; return how many are left."""
        path = self._send_path
        if path.state is not OPEN:
            path.raise_unusable()
        clients = [self._client, *self._variants.values()]
        deadline = time.monotonic() + timeout
        return sum(client.flush(max(0.0, deadline - time.monotonic())) for client in clients)

    def close(self, timeout: float = 30.0) -> int:
        """Flush for up to ``timeout`` seconds, fail what is still queued, and release the clients.

        Returns how many messages were not delivered (their handles fail with a purge error).
        Idempotent: a second call returns the first call's count. Any produce after close
        raises :class:`ProducerClosedError`.
        """
        path = self._send_path
        with self._lock:
            if path.state is CLOSED:
                return self._undelivered
            forked = path.state is FORKED
            path.state = CLOSED
            self._closing.set()
        if forked:  # the parent owns the clients; touching them here would hang
            return 0
        deadline = time.monotonic() + timeout
        undelivered = 0
        for client in [self._client, *self._variants.values()]:
            undelivered += client.close(max(0.0, deadline - time.monotonic()))
        self._undelivered = undelivered
        path.release_room_waiters()
        _live_send_paths.discard(path)
        if ev.PRODUCER_CLOSED in self.monitor.subscribed:
            self.monitor.instrument(
                ev.PRODUCER_CLOSED, producer_id=self.id, undelivered=undelivered
            )
        return undelivered

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __len__(self) -> int:
        """Messages waiting in librdkafka's queues (not yet acknowledged)."""
        return sum(len(client) for client in [self._client, *self._variants.values()])

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._send_path.state is CLOSED

    def __repr__(self) -> str:
        return f"<Producer {self.id} {self._send_path.state}>"

    # -- internals ----------------------------------------------------------------------------

    def _active_client(self) -> ProducerClient:
        """The producer's own client, rebuilt after a fatal error."""
        client = self._client
        if client.credentials_refused is not None:
            raise client.credentials_refused
        if client.fatal is not None:
            client = self._reload(client)
        return client

    def _replace_failed(self, failed: ProducerClient) -> ProducerClient:
        """The client a send meant for ``failed`` (which hit a fatal error) goes to: the
        producer's own, rebuilt; a variant's client is never rebuilt, its error is raised."""
        variants = list(self._variants.values())  # a copy: variant() may add one meanwhile
        if any(client is failed for client in variants):
            assert failed.fatal is not None
            raise failed.fatal
        return self._active_client()

    def _reload(self, failed: ProducerClient) -> ProducerClient:
        """Replace a client that hit a fatal error (with back-off and a cap on attempts)."""
        with self._lock:
            if self._client is not failed:
                return self._client
            error = failed.fatal
            assert error is not None
            if time.monotonic() - self._last_reload >= self.reload_calm:
                self._reloads = 0  # a client that ran a while earns back the whole budget
            if (
                not self.settings.reload_on_fatal_error
                or self._reloads >= self.settings.max_reloads
            ):
                raise error
            self._reloads += 1
            backoff = min(30.0, self.settings.reload_backoff * 2 ** (self._reloads - 1))
            if self._closing.wait(backoff):
                self._send_path.raise_unusable()
            failed.close(1.0)
            self._last_reload = time.monotonic()
            self._client = self._new_client(self.settings.kafka, f"conveyor-producer-{self.id}")
            self.transactions.reset()
        if ev.PRODUCER_RELOADED in self.monitor.subscribed:
            self.monitor.instrument(
                ev.PRODUCER_RELOADED, producer_id=self.id, attempt=self._reloads, error=error
            )
        return self._client

    def _new_client(self, config: Mapping[str, Any], name: str) -> ProducerClient:
        client = ProducerClient(
            config,
            name,
            on_error=lambda error: self._report_error("librdkafka.error", error),
            on_fatal=lambda error: self._report_error("producer.fatal", error),
            on_served=self._send_path.wake_room_waiters,
            on_callback_error=self._on_callback_crash,
            on_statistics=self._on_statistics,
            on_connection=connection_reporter(self.monitor),
        )
        # Handles of this client's messages: a waiter may serve this client's queue itself, and
        # a timed-out one asks whether its topic exists on the client's explainer thread.
        clarify = client.clarify
        observer = self._send_path.observer
        client.plain_handle = DeliveryHandle.bound_to(observer, self._explain, client.lead, clarify)
        client.acknowledged_handle = AcknowledgedHandle.bound_to(
            observer, self._explain, client.lead, clarify
        )
        return client

    def _explain(self, failure: DeliveryError) -> DeliveryError:
        """Messages purged because Kafka refused the credentials say so (a timed-out one was
        explained before its handle completed: see :mod:`conveyor.driver.explainer`)."""
        refused = self._client.credentials_refused
        if refused is not None and failure.code in PURGED:
            explained = DeliveryError(
                f"not delivered to {failure.topic!r}: {refused}",
                code=refused.code,
                name=refused.name,
            )
            explained.topic, explained.partition = failure.topic, failure.partition
            explained.label = failure.label
            explained.persistence = failure.persistence
            return explained
        return failure

    def _report_error(self, kind: str, error: BaseException) -> None:
        if ev.ERROR_OCCURRED in self.monitor.subscribed:
            self.monitor.instrument(ev.ERROR_OCCURRED, type=kind, producer_id=self.id, error=error)

    def _on_callback_crash(self, error: BaseException) -> None:
        self._report_error("producer.callback.error", error)

    def _on_statistics(self, raw: str) -> None:
        if ev.STATISTICS_EMITTED in self.monitor.subscribed:
            self.monitor.instrument(
                ev.STATISTICS_EMITTED, producer_id=self.id, statistics=json.loads(raw)
            )
