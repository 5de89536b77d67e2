"""Connection news (lost, still lost, back) from the driver's clients, as monitor events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.instrumentation import events as ev
from conveyor.instrumentation.monitor import Monitor

__all__ = ["connection_reporter"]


def connection_reporter(monitor: Monitor) -> Callable[[Any], None]:
    """A callback for a client's ``on_connection`` that emits ``connection.lost`` and
    ``connection.restored`` on ``monitor``."""

    def report(news: Any) -> None:
        if news.restored:
            if ev.CONNECTION_RESTORED in monitor.subscribed:
                monitor.instrument(
                    ev.CONNECTION_RESTORED,
                    client=news.client,
                    down_for=news.down_for,
                    errors=news.errors,
                )
        elif ev.CONNECTION_LOST in monitor.subscribed:
            monitor.instrument(
                ev.CONNECTION_LOST,
                client=news.client,
                error=news.error,
                reminder=news.reminder,
                down_for=news.down_for,
                errors=news.errors,
            )

    return report
