"""``UiHost``: what the web UI's pages and actions use of an app's web side (``app.web``,
a :class:`~conveyor.web.web.Web`), so that the UI names neither the App nor ``Web``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from conveyor.metrics.prometheus import Metrics
    from conveyor.routing.host import RoutedHost
    from conveyor.web.commands import Commander
    from conveyor.web.topics import WebTopics

__all__ = ["UiHost"]


class UiHost(Protocol):
    """The app, its web topics and reporting interval, its commander and its metrics."""

    @property
    def app(self) -> RoutedHost:
        """The app whose UI this is (its settings, routes and producer)."""

    @property
    def topics(self) -> WebTopics:
        """The web UI's topics."""

    @property
    def tracking_interval(self) -> float:
        """Seconds between a process's reports."""

    @property
    def connect_group(self) -> str:
        """The connect cluster the Connectors page shows (``conveyor connect worker --group``)."""

    @property
    def metrics(self) -> Metrics | None:
        """The app's metrics (``None``: it has none to serve)."""

    def commander(self) -> Commander:
        """Sends commands to the app's processes and waits for their results."""
