"""``SchedulesHost``: a host with scheduled messages and recurring tasks (the App's
``schedules`` and ``recurring_tasks``), for the features that read them (the web UI's
Schedules page)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from conveyor.schedules.dispatcher import Schedules
    from conveyor.schedules.recurring import RecurringTasks

__all__ = ["SchedulesHost"]


@runtime_checkable
class SchedulesHost(Protocol):
    """A host with scheduled messages; ``isinstance(host, SchedulesHost)`` tells one that has
    them. Reading its members makes no client (the App makes its dispatcher when first read)."""

    @property
    def schedules(self) -> Schedules:
        """The dispatcher of scheduled messages (``app.schedules.enable()``)."""

    @property
    def recurring_tasks(self) -> RecurringTasks | None:
        """The recurring tasks (``None`` until ``app.recurring(...)`` declares one)."""
