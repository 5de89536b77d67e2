"""``RoutedHost``: a :class:`~conveyor.host.Host` with its routes, for the features that
declare routes (schedules, recurring tasks) or read them (liveness, the web UI).

Apart from ``Host`` because a consumer names its host and the routes name the consumers:
in one protocol, the three would import each other in a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from conveyor.host import Host

if TYPE_CHECKING:
    from conveyor.routing.routes import Routes

__all__ = ["RoutedHost"]


class RoutedHost(Host, Protocol):
    """A host and the routes it runs."""

    @property
    def routes(self) -> Routes:
        """Which consumer class handles which topic, in which group."""
