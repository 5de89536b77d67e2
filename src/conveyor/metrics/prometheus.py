"""``Metrics`` (``app.metrics``): Prometheus metrics from the monitor and ``app.snapshot()``.

Counters and histograms are fed by monitor events as they happen; gauges (lag, workers,
librdkafka's statistics) are read when Prometheus scrapes. Names follow OpenTelemetry's
messaging metrics where one exists (``messaging.client.sent.messages`` is exposed as
``messaging_client_sent_messages_total``), ``conveyor_*`` otherwise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.instrumentation import events as ev
from conveyor.metrics.statistics import HELP, StatisticsGauge, gauges_of

if TYPE_CHECKING:
    from conveyor.host import Host
    from conveyor.instrumentation import Event

__all__ = ["CONTENT_TYPE", "Metrics"]

INSTALL_HINT = "pip install 'conveyor[prometheus]'"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_DURATIONS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SIZES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
_HOOKS = {
    ev.CONSUMER_CONSUMED: "consume",
    ev.CONSUMER_TICKED: "tick",
    ev.CONSUMER_EOFED: "eofed",
    ev.CONSUMER_REVOKED: "revoked",
    ev.CONSUMER_SHUTDOWN: "shutdown",
}
_STALE_STATISTICS = 300.0  # seconds after which a client's statistics are no longer shown


def _prometheus() -> Any:
    try:
        import prometheus_client  # noqa: PLC0415 - the extra is optional: reported at enable()
    except ImportError as exc:
        raise ConfigurationError(
            f"metrics need prometheus-client, which is not installed ({exc}): {INSTALL_HINT}",
            "metrics",
        ) from None
    return prometheus_client


def _group_of(consumer: Any) -> str:
    route = getattr(consumer, "route", None)
    return str(getattr(route, "consumer_group", "") or "")


class Metrics:
    """Prometheus metrics of an app (``app.metrics``).

    Example::

        app.metrics.enable()              # its own registry; or enable(registry=REGISTRY)
        app.metrics.serve(port=9464)      # GET http://127.0.0.1:9464/metrics
        app.run()

    librdkafka's statistics become gauges when the app's ``kafka`` settings have
    ``statistics.interval.ms``.
    """

    def __init__(self, app: Host) -> None:
        self.app = app
        self.enabled = False
        self.registry: Any = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._statistics: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float]] = {}
        self._lock = threading.Lock()
        self._server: Any = None

    def enable(self, registry: Any = None) -> None:
        """Count from now on, into ``registry`` (a new ``CollectorRegistry`` by default).

        Raises:
            ConfigurationError: prometheus-client is not installed (``conveyor[prometheus]``),
                or metrics were enabled already.
        """
        client = _prometheus()
        if self.enabled:
            raise ConfigurationError("app.metrics.enable() was called twice", "metrics")
        self.registry = registry if registry is not None else client.CollectorRegistry()
        self._build(client)
        self.registry.register(_SnapshotCollector(self, client))
        monitor = self.app.monitor
        for name, listener in (
            (ev.MESSAGE_ACKNOWLEDGED, self._acknowledged),
            (ev.MESSAGE_PRODUCED_SYNC, self._produced_sync),
            (ev.CONSUMER_CONSUMED, self._consumed),
            (ev.CONSUMER_TICKED, self._hook_ran),
            (ev.CONSUMER_EOFED, self._hook_ran),
            (ev.CONSUMER_REVOKED, self._hook_ran),
            (ev.CONSUMER_SHUTDOWN, self._hook_ran),
            (ev.OFFSETS_COMMITTED, self._committed),
            (ev.DEAD_LETTER_QUEUE_DISPATCHED, self._dispatched),
            (ev.ERROR_OCCURRED, self._error),
            (ev.STATISTICS_EMITTED, self._statistics_emitted),
            (ev.STATE_RESTORING, self._restoring),
            (ev.STATE_RESTORED, self._restored),
        ):
            self._unsubscribe.append(monitor.subscribe(name, listener))
        self.enabled = True

    def _build(self, client: Any) -> None:
        registry = self.registry
        counter, histogram = client.Counter, client.Histogram
        self.sent = counter(
            "messaging_client_sent_messages",
            "Messages the producer sent, by outcome (error_type empty when delivered).",
            ["messaging_system", "messaging_destination_name", "error_type"],
            registry=registry,
        )
        self.consumed = counter(
            "messaging_client_consumed_messages",
            "Messages handed to consume() that it processed.",
            ["messaging_system", "messaging_destination_name", "messaging_consumer_group_name"],
            registry=registry,
        )
        self.operation_duration = histogram(
            "messaging_client_operation_duration_seconds",
            "Duration of a client operation: send (produce_sync until acknowledged), commit.",
            ["messaging_system", "messaging_operation_name", "messaging_destination_name"],
            buckets=_DURATIONS,
            registry=registry,
        )
        self.process_duration = histogram(
            "messaging_process_duration_seconds",
            "Duration of consume() per batch (error_type set when it raised).",
            [
                "messaging_system",
                "messaging_destination_name",
                "messaging_consumer_group_name",
                "error_type",
            ],
            buckets=_DURATIONS,
            registry=registry,
        )
        self.batch_size = histogram(
            "conveyor_batch_size",
            "Messages per batch handed to consume().",
            ["topic"],
            buckets=_SIZES,
            registry=registry,
        )
        self.job_duration = histogram(
            "conveyor_job_duration_seconds",
            "Duration of a consumer hook run as a job on the worker pool.",
            ["topic", "hook"],
            buckets=_DURATIONS,
            registry=registry,
        )
        self.retries = counter(
            "conveyor_retries",
            "Batches whose consume() raised and that will be retried after the back-off.",
            ["topic"],
            registry=registry,
        )
        self.dead_letters = counter(
            "conveyor_dead_letter_dispatches",
            "Messages moved to a dead letter queue.",
            ["topic", "dlq_topic"],
            registry=registry,
        )
        self.errors = counter(
            "conveyor_errors",
            "Every error.occurred event, by type.",
            ["type"],
            registry=registry,
        )
        self.restored_records = counter(
            "conveyor_state_restored_records",
            "Changelog records the state stores' restores replayed (0 for a warm store).",
            ["topic", "store"],
            registry=registry,
        )
        self.restored_bytes = counter(
            "conveyor_state_restored_bytes",
            "Bytes of changelog records the state stores' restores replayed.",
            ["topic", "store"],
            registry=registry,
        )
        self.restore_duration = histogram(
            "conveyor_state_restore_duration_seconds",
            "Duration of a store partition's opening, its restore included.",
            ["topic", "store"],
            buckets=_DURATIONS,
            registry=registry,
        )
        self.restore_remaining = client.Gauge(
            "conveyor_state_restore_remaining_records",
            "Changelog offsets a restoring store partition has still to read (0 once open).",
            ["topic", "partition", "store"],
            registry=registry,
        )

    def disable(self) -> None:
        """Stop counting (what is counted stays in the registry)."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        self.enabled = False

    # -- serving ------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (what ``/metrics`` returns)."""
        if not self.enabled:
            raise ConfigurationError(
                "metrics are not enabled: call app.metrics.enable()", "metrics"
            )
        return bytes(_prometheus().generate_latest(self.registry))

    def serve(self, port: int = 9464, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread (enabling metrics if they are
        not); returns the port (useful with ``port=0``)."""
        client = _prometheus()
        if not self.enabled:
            self.enable()
        server, thread = client.start_http_server(port, addr=host, registry=self.registry)
        self._server = (server, thread)
        self.app.add_closing_hook(self.close)
        return int(server.server_port)

    def close(self) -> None:
        """Stop the server that :meth:`serve` started."""
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(5)
            self._server = None

    # -- monitor listeners --------------------------------------------------------------------

    def _acknowledged(self, event: Event) -> None:
        self.sent.labels("kafka", event["topic"], "").inc()

    def _produced_sync(self, event: Event) -> None:
        report = event["report"]
        self.operation_duration.labels("kafka", "send", report.topic).observe(event["duration"])

    def _consumed(self, event: Event) -> None:
        topic, count = event["topic"], event["count"]
        group = _group_of(event["consumer"])
        self.consumed.labels("kafka", topic, group).inc(count)
        self.process_duration.labels("kafka", topic, group, "").observe(event["duration"])
        self.batch_size.labels(topic).observe(count)
        self.job_duration.labels(topic, "consume").observe(event["duration"])

    def _hook_ran(self, event: Event) -> None:
        self.job_duration.labels(event["topic"], _HOOKS[event.name]).observe(event["duration"])

    def _committed(self, event: Event) -> None:
        for topic in {topic for topic, _partition, _offset in event["offsets"]}:
            self.operation_duration.labels("kafka", "commit", topic).observe(event["duration"])

    def _dispatched(self, event: Event) -> None:
        self.dead_letters.labels(event["topic"], event["dlq_topic"]).inc()

    def _error(self, event: Event) -> None:
        kind = str(event.get("type", "unknown"))
        self.errors.labels(kind).inc()
        if kind == "producer.delivery.error":
            failure = event["error"]
            self.sent.labels(
                "kafka", event["topic"], str(getattr(failure, "name", "") or type(failure).__name__)
            ).inc()
        elif kind == "consumer.consume.error":
            topic = event["topic"]
            error = type(event["error"]).__qualname__
            group = _group_of(event.get("consumer"))
            duration = event.get("duration")
            if isinstance(duration, int | float):
                self.process_duration.labels("kafka", topic, group, error).observe(duration)
            if event.get("action") == "retry":
                self.retries.labels(topic).inc()

    def _restoring(self, event: Event) -> None:
        remaining = max(0, int(event["end"]) - int(event["offset"]))
        self.restore_remaining.labels(event["topic"], str(event["partition"]), event["store"]).set(
            remaining
        )

    def _restored(self, event: Event) -> None:
        topic, store = event["topic"], event["store"]
        self.restored_records.labels(topic, store).inc(event["records"])
        self.restored_bytes.labels(topic, store).inc(event["bytes"])
        self.restore_duration.labels(topic, store).observe(event["seconds"])
        self.restore_remaining.labels(topic, str(event["partition"]), store).set(0)

    def _statistics_emitted(self, event: Event) -> None:
        client = str(event.get("producer_id") or event.get("listener") or "client")
        now = time.monotonic()
        with self._lock:
            # Merged, not replaced: a window without requests to a broker has no round trips,
            # and the last measured one stays the best answer until it is stale.
            for name, labels, value in gauges_of(client, event["statistics"]):
                self._statistics[(name, tuple(labels.items()))] = (now, value)

    def statistics(self) -> list[StatisticsGauge]:
        """The latest statistics gauges of every client that reported recently."""
        now = time.monotonic()
        with self._lock:
            for key, (at, _value) in list(self._statistics.items()):
                if now - at > _STALE_STATISTICS:
                    del self._statistics[key]
            return [
                (name, dict(labels), value)
                for (name, labels), (_at, value) in sorted(self._statistics.items())
            ]


class _SnapshotCollector:
    """Gauges read at scrape time: lag per partition, the worker pool, librdkafka's statistics."""

    def __init__(self, metrics: Metrics, client: Any) -> None:
        self.metrics = metrics
        from prometheus_client.core import (  # noqa: PLC0415 - the optional extra
            CounterMetricFamily,
            GaugeMetricFamily,
        )

        self.family = GaugeMetricFamily
        self.counter_family = CounterMetricFamily

    def describe(self) -> list[Any]:
        return []  # collected only at scrape: the registry need not check names up front

    def collect(self) -> Iterator[Any]:
        snapshot = self.metrics.app.snapshot()
        partition_labels = ["consumer_group", "topic", "partition"]
        lag = self.family(
            "conveyor_consumer_lag_messages",
            "Messages of the partition not processed yet (high watermark minus the marked offset).",
            labels=partition_labels,
        )
        lag_seconds = self.family(
            "conveyor_consumer_lag_seconds",
            "Age of the oldest message not processed yet (0 when caught up; an upper bound when "
            "it was not fetched yet).",
            labels=partition_labels,
        )
        for part in snapshot.partitions:
            labels = [part.consumer_group, part.topic, str(part.partition)]
            if part.lag is not None:
                lag.add_metric(labels, part.lag)
            if part.lag_seconds is not None:
                lag_seconds.add_metric(labels, part.lag_seconds)
        yield lag
        yield lag_seconds
        pool = snapshot.pool
        if pool is not None:
            for name, help_text, value in (
                ("conveyor_workers", "Worker threads.", pool.size),
                ("conveyor_workers_busy", "Workers running a job now.", pool.busy),
                ("conveyor_jobs_queued", "Jobs waiting for a worker.", pool.queued),
                (
                    "conveyor_worker_utilization",
                    "Share of workers busy (0 to 1).",
                    pool.utilization,
                ),
            ):
                gauge = self.family(name, help_text)
                gauge.add_metric([], value)
                yield gauge
            busy = self.counter_family(
                "conveyor_worker_busy_seconds", "Seconds of work done by the worker pool."
            )
            busy.add_metric([], pool.busy_seconds)
            yield busy
        families: dict[str, Any] = {}
        for name, names, value in self.metrics.statistics():
            family = families.get(name)
            if family is None:
                family = families[name] = self.family(
                    name,
                    HELP.get(name, "From librdkafka's statistics (statistics.interval.ms)."),
                    labels=list(names),
                )
            family.add_metric(list(names.values()), value)
        yield from families.values()
