"""``AppUnderTest``: what ``conveyor.testing`` uses of an app (its routes, settings, producers,
and the way to make it build producers that capture)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from conveyor.routing.host import RoutedHost

if TYPE_CHECKING:
    from conveyor.producer.producer import Producer

__all__ = ["AppUnderTest"]


class AppUnderTest(RoutedHost, Protocol):
    """An app under test: a routed host that can be told how to make its producers."""

    def make_producers_with(self, factory: Callable[..., Producer]) -> None:
        """From now on make the app's producers with ``factory(settings, monitor=...)``."""
