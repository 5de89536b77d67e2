"""``Host``: what the features (the web UI's side, metrics, schedules, liveness, the swarm
heartbeat, the RPC client, replays) and consumers use of the app that runs them.

:class:`~conveyor.app.App` is the one host; the features name this protocol, never the App,
so that each depends on what it uses and the App alone depends on them all. ``RoutedHost``
adds the routes, for the features that declare routes or read them: the routes name the
consumers, and a consumer names its host, so the plain ``Host`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from conveyor.admin.admin import Admin
    from conveyor.instrumentation.monitor import Monitor
    from conveyor.processing.snapshot import Snapshot
    from conveyor.producer.producer import Producer
    from conveyor.settings import AppSettings
    from conveyor.tracing.tracer import Tracing

__all__ = ["Host"]


class StoreAnswers(Protocol):
    """What a process answers a ``lookup`` command with (``app.stores``)."""

    def answer(
        self, topic: str, partition: int, store: str, key: Any, group: str | None = None
    ) -> dict[str, Any]:
        """The key's raw value in this process's copy of the partition's store."""

    def reports(self) -> list[dict[str, Any]]:
        """This process's store partitions (the web UI's reports carry them)."""

    def rebuild(
        self, topic: str, partition: int, *, store: str | None = None, group: str | None = None
    ) -> dict[str, Any]:
        """Rebuild this process's copy of the partition's stores from their changelogs."""

    def get(
        self,
        store: str,
        key: Any,
        default: Any = None,
        *,
        topic: str | None = None,
        group: str | None = None,
        timeout: float = 5.0,
    ) -> Any:
        """``key``'s value in ``store``, wherever its partition is."""


class Host(Protocol):
    """What runs consumers and features: the app's settings, event bus, clients, state and
    the commands that steer it."""

    @property
    def settings(self) -> AppSettings:
        """The app's validated settings (``kafka``, ``client_id``...)."""

    @property
    def monitor(self) -> Monitor:
        """The event bus the features subscribe to and instrument."""

    @property
    def state(self) -> str:
        """idle, starting, running, quiet, stopping or stopped."""

    @property
    def tracing(self) -> Tracing:
        """OpenTelemetry tracing (off until ``enable()``)."""

    @property
    def producer(self) -> Producer:
        """The app's producer (made at first use)."""

    @property
    def transactional_producer(self) -> Producer:
        """The app's transactional producer (made at first use)."""

    @property
    def admin(self) -> Admin:
        """The app's admin client (made at first use)."""

    @property
    def stores(self) -> StoreAnswers:
        """Reads of the state stores' keys (``lookup`` commands answer from it)."""

    def snapshot(self) -> Snapshot:
        """A read-only picture of the running engine."""

    def stop(self) -> None:
        """Begin a graceful stop."""

    def quiet(self) -> None:
        """Finish the batches in flight, take no new ones."""

    def pause(
        self, topic: str, partition: int, *, until: datetime | None = None, group: str | None = None
    ) -> None:
        """Stop processing one partition in this process."""

    def resume(self, topic: str, partition: int, *, group: str | None = None) -> None:
        """Resume a paused partition."""

    def seek(
        self, topic: str, partition: int, to: int | datetime, *, group: str | None = None
    ) -> int:
        """Continue one partition from an offset or a time; returns the offset."""

    def add_closing_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` when the app stops, after its consumers stopped and before its
        producers close."""
