"""The default logging listener: the monitor's events as concise log lines."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from conveyor.instrumentation import events
from conveyor.instrumentation.background_log import BACKGROUND_LOG
from conveyor.instrumentation.json_log import FIELDS
from conveyor.instrumentation.monitor import Event, Monitor

__all__ = ["LoggingListener"]

# What an error event may say it is about, carried as a JSON line's fields.
_ABOUT = ("group", "consumer_group", "topic", "partition", "listener", "client", "where")


class LoggingListener:
    """Logs what an operator needs at INFO and above: the app running, quieting, stopping and
    stopped, partitions assigned and revoked, transactions aborted, producers reloaded and
    closed, a lost connection once at WARNING (a reminder every 30 s while it lasts) and its
    return, errors at ERROR. Each consumed batch and each delivery is a DEBUG line.

    ``LoggingListener().attach(monitor)`` subscribes it. Deliveries and consumed batches are
    listened to only while the logger is enabled for DEBUG when it attaches or
    :meth:`refresh` is called (an App refreshes its own as it starts), so that they cost
    nothing otherwise: an event someone listens to is built for every message or batch.
    Lines are written by a background thread: the thread that emitted the event (a listener
    in the middle of a poll, say) never waits for a slow handler. Each record carries the
    fields it is about (``group``, ``topic``, ``partition`` ...) for
    :class:`~conveyor.instrumentation.json_log.JsonFormatter`.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger("conveyor")
        self._monitor: Monitor | None = None
        self._by_level: list[Callable[[], None]] = []  # unsubscribes what refresh() subscribed

    def _log(
        self, level: int, message: str, *args: Any, exc_info: Any = None, **fields: Any
    ) -> None:
        BACKGROUND_LOG.log(
            self.logger,
            level,
            message,
            *args,
            exc_info=exc_info,
            extra={FIELDS: fields} if fields else None,
        )

    def attach(self, monitor: Monitor) -> None:
        monitor.subscribe(events.ERROR_OCCURRED, self.on_error)
        monitor.subscribe(events.CONNECTION_LOST, self.on_connection_lost)
        monitor.subscribe(events.CONNECTION_RESTORED, self.on_connection_restored)
        for name in (events.TRANSACTION_ABORTED, events.PRODUCER_RELOADED, events.PRODUCER_CLOSED):
            monitor.subscribe(name, self.on_info)
        for name in (events.REBALANCE_PARTITIONS_ASSIGNED, events.REBALANCE_PARTITIONS_REVOKED):
            monitor.subscribe(name, self.on_rebalance)
        for name in (events.APP_RUNNING, events.APP_QUIETING, events.APP_STOPPING):
            monitor.subscribe(name, self.on_app)
        monitor.subscribe(events.APP_STOPPED, self.on_stopped)
        self._monitor = monitor
        self.refresh()

    def refresh(self) -> None:
        """Listen to deliveries and consumed batches as the logger's level now asks."""
        monitor = self._monitor
        if monitor is None:
            return
        for unsubscribe in self._by_level:
            unsubscribe()
        self._by_level = []
        if self.logger.isEnabledFor(logging.DEBUG):
            self._by_level.append(
                monitor.subscribe(events.MESSAGE_ACKNOWLEDGED, self.on_acknowledged)
            )
            self._by_level.append(monitor.subscribe(events.CONSUMER_CONSUMED, self.on_consumed))

    def on_error(self, event: Event) -> None:
        error = event.get("error")
        context = {
            key: value for key, value in event.items() if key not in ("error", "type", "time")
        }
        self._log(
            logging.ERROR,
            "%s: %s%s",
            event.get("type", "error"),
            error,
            f" {context}" if context else "",
            exc_info=error if isinstance(error, BaseException) and error.__traceback__ else None,
            event=event.get("type", "error"),
            **{key: context[key] for key in _ABOUT if key in context},
        )

    def on_connection_lost(self, event: Event) -> None:
        if event["reminder"]:
            self._log(
                logging.WARNING,
                "%s: still no connection to Kafka after %.0f s (%s failed attempts): %s",
                event["client"],
                event["down_for"],
                event["errors"],
                event["error"],
            )
        else:
            self._log(
                logging.WARNING,
                "%s: lost the connection to Kafka: %s",
                event["client"],
                event["error"],
            )

    def on_connection_restored(self, event: Event) -> None:
        self._log(
            logging.INFO,
            "%s: the connection to Kafka is back after %.1f s (%s failed attempts)",
            event["client"],
            event["down_for"],
            event["errors"],
        )

    def on_info(self, event: Event) -> None:
        details = " ".join(f"{key}={value}" for key, value in event.items() if key != "time")
        self._log(logging.INFO, "%s %s", event.name, details)

    def on_consumed(self, event: Event) -> None:
        """One concise DEBUG line per batch: topic/partition, count, offsets, milliseconds."""
        if self.logger.isEnabledFor(logging.DEBUG):
            self._log(
                logging.DEBUG,
                "consumed %s/%s: %s messages (%s-%s) in %.1f ms",
                event["topic"],
                event["partition"],
                event["count"],
                event["first_offset"],
                event["last_offset"],
                event["duration"] * 1000,
                event=event.name,
                topic=event["topic"],
                partition=event["partition"],
                count=event["count"],
            )

    def on_rebalance(self, event: Event) -> None:
        if self.logger.isEnabledFor(logging.INFO) and event["partitions"]:
            parts = ", ".join(f"{topic}/{partition}" for topic, partition in event["partitions"])
            verb = "assigned" if event.name == events.REBALANCE_PARTITIONS_ASSIGNED else "revoked"
            topics = sorted({topic for topic, _partition in event["partitions"]})
            self._log(
                logging.INFO,
                "%s %s: %s",
                event["listener"],
                verb,
                parts,
                event=event.name,
                listener=event["listener"],
                group=event.get("group"),
                topic=topics[0] if len(topics) == 1 else topics,
                partitions=[f"{topic}/{partition}" for topic, partition in event["partitions"]],
            )

    def on_app(self, event: Event) -> None:
        """The app running, quieting or stopping: one INFO line each."""
        app = event["app"]
        settings = app.settings
        state = event.name.split(".", 1)[1]
        if event.name == events.APP_RUNNING:
            groups = sorted({route.consumer_group for route in app.routes.active()})
            self._log(
                logging.INFO,
                "app %s running: groups %s, concurrency %s",
                settings.client_id,
                ", ".join(groups) or "-",
                settings.concurrency,
                event=event.name,
                client=settings.client_id,
                group=groups,
            )
        else:
            self._log(
                logging.INFO,
                "app %s %s",
                settings.client_id,
                state,
                event=event.name,
                client=settings.client_id,
            )

    def on_stopped(self, event: Event) -> None:
        settings = event["app"].settings
        self._log(
            logging.INFO if event["clean"] else logging.WARNING,
            "app %s stopped%s",
            settings.client_id,
            "" if event["clean"] else " (not cleanly)",
            event=event.name,
            client=settings.client_id,
            clean=event["clean"],
        )

    def on_acknowledged(self, event: Event) -> None:
        self._log(
            logging.DEBUG,
            "acknowledged %s/%s@%s",
            event["topic"],
            event["partition"],
            event["offset"],
            event=event.name,
            topic=event["topic"],
            partition=event["partition"],
        )
