"""An App is a :class:`JobsHost` (the web UI reads its job queues through it); a host without
``jobs`` is not, and the check reads nothing else of the host."""

from __future__ import annotations

from typing import Any

from conveyor import App
from conveyor.jobs.host import JobsHost


def test_an_app_is_a_jobs_host() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})
    assert isinstance(app, JobsHost)
    host: JobsHost = app  # mypy: the App's jobs are what the protocol names
    assert host.jobs is app.jobs


def test_a_host_without_jobs_is_not_and_is_read_for_jobs_alone() -> None:
    read: list[str] = []

    class Host:
        def __getattr__(self, name: str) -> Any:
            read.append(name)
            raise AttributeError(name)

    assert not isinstance(Host(), JobsHost)
    assert set(read) <= {"jobs"}
