"""The default logging listener: the monitor's events as concise log lines."""

from __future__ import annotations

import logging

from conveyor.instrumentation import events
from conveyor.instrumentation.monitor import Event, Monitor

__all__ = ["LoggingListener"]


class LoggingListener:
    """Logs errors at ERROR, transactions, reloads and closes at INFO, deliveries at DEBUG.

    ``LoggingListener().attach(monitor)`` subscribes it; deliveries are logged only when
    the logger is enabled for DEBUG at attach time (so it costs nothing otherwise).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("conveyor")

    def attach(self, monitor: Monitor) -> None:
        monitor.subscribe(events.ERROR_OCCURRED, self.on_error)
        for name in (events.TRANSACTION_ABORTED, events.PRODUCER_RELOADED, events.PRODUCER_CLOSED):
            monitor.subscribe(name, self.on_info)
        if self.logger.isEnabledFor(logging.DEBUG):
            monitor.subscribe(events.MESSAGE_ACKNOWLEDGED, self.on_acknowledged)
        monitor.subscribe(events.CONSUMER_CONSUMED, self.on_consumed)
        for name in (events.REBALANCE_PARTITIONS_ASSIGNED, events.REBALANCE_PARTITIONS_REVOKED):
            monitor.subscribe(name, self.on_rebalance)

    def on_error(self, event: Event) -> None:
        error = event.get("error")
        context = {
            key: value for key, value in event.items() if key not in ("error", "type", "time")
        }
        self.logger.error(
            "%s: %s%s",
            event.get("type", "error"),
            error,
            f" {context}" if context else "",
            exc_info=error if isinstance(error, BaseException) and error.__traceback__ else None,
        )

    def on_info(self, event: Event) -> None:
        details = " ".join(f"{key}={value}" for key, value in event.items() if key != "time")
        self.logger.info("%s %s", event.name, details)

    def on_consumed(self, event: Event) -> None:
        """One concise line per batch: topic/partition, count, offsets, milliseconds."""
        if self.logger.isEnabledFor(logging.INFO):
            self.logger.info(
                "consumed %s/%s: %s messages (%s-%s) in %.1f ms",
                event["topic"], event["partition"], event["count"], event["first_offset"],
                event["last_offset"], event["duration"] * 1000,
            )  # fmt: skip

    def on_rebalance(self, event: Event) -> None:
        if self.logger.isEnabledFor(logging.INFO) and event["partitions"]:
            parts = ", ".join(f"{topic}/{partition}" for topic, partition in event["partitions"])
            verb = "assigned" if event.name == events.REBALANCE_PARTITIONS_ASSIGNED else "revoked"
            self.logger.info("%s %s: %s", event["listener"], verb, parts)

    def on_acknowledged(self, event: Event) -> None:
        self.logger.debug(
            "acknowledged %s/%s@%s", event["topic"], event["partition"], event["offset"]
        )
