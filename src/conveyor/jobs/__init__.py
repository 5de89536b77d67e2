"""Background jobs over Kafka: ``@app.job(...)`` makes a function a job, ``job.enqueue(...)``
sends it to its queue's topic, the app's consumers run it; retries later through scheduled
messages, dead jobs to a topic of their own."""

from __future__ import annotations

from conveyor.jobs.job import Enqueuer, Job, JobContext, current_job
from conveyor.jobs.queues import Jobs, Queue, UnknownJobError
from conveyor.jobs.watchdog import JobTimeoutError

__all__ = [
    "Enqueuer",
    "Job",
    "JobContext",
    "JobTimeoutError",
    "Jobs",
    "Queue",
    "UnknownJobError",
    "current_job",
]
