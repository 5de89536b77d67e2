"""``JobsHost``: a host with background jobs (the App's ``jobs``), for the features that read
its job queues (the web UI's Jobs and dead-job pages).

Beside the jobs rather than beside ``RoutedHost`` in ``routing/host.py``: the jobs' own host
protocol names ``RoutedHost``, so naming ``Jobs`` there would close an import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from conveyor.jobs.queues import Jobs

__all__ = ["JobsHost"]


@runtime_checkable
class JobsHost(Protocol):
    """A host with background jobs; ``isinstance(host, JobsHost)`` tells one that has them.

    It names ``jobs`` alone: before Python 3.12 ``isinstance`` reads every member a protocol
    names, and reading a host's ``producer`` or ``admin`` would make that client."""

    @property
    def jobs(self) -> Jobs:
        """The host's job queues and jobs (``@app.job(...)`` registers one)."""
