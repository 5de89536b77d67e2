"""Declaring queues and running jobs without a broker: ``app.schedules.enable(...)`` after the
first ``@app.job`` sets the schedules up as the app says (the jobs had enabled them with the
defaults); a queue commits its jobs' offsets every ``commit_interval``; a job message whose
attempt header is malformed dies at once, saying so, instead of failing its batch forever."""

from __future__ import annotations

import pytest

from conveyor import App, testing
from conveyor.errors import ConfigurationError
from conveyor.jobs.wire import ATTEMPT, DEAD_CLASS, DEAD_MESSAGE, ID, NAME, encode, header
from conveyor.messages import Message
from conveyor.schedules.wire import TOPIC


def make_app() -> App:
    return App(client_id="queues", kafka={"bootstrap.servers": "127.0.0.1:9"})


def _dead(app: App, topic: str) -> list[Message]:
    """The dead jobs sent to ``topic``: scheduled for now, committed with the offset past them
    (the schedules dispatcher sends them on)."""
    return [
        message
        for message in testing.produced(app, app.schedules.topic)
        if header(message.raw_headers, TOPIC) == topic
    ]


def _schedule_routes(app: App) -> list[tuple[str, int | None]]:
    return [
        (route.name, route.partitions)
        for route in app.routes
        if route.consumer_class is not None and route.consumer_class.__name__ == "ScheduledMessages"
    ]


def test_schedules_enable_after_the_first_job_sets_them_up_as_given() -> None:
    app = make_app()

    @app.job(queue="mail")
    def send(address: str) -> None:
        pass

    assert app.schedules.enabled
    default = app.schedules.topic  # the app's own (<group>_schedules)
    assert _schedule_routes(app) == [(default, 3)], "enabled by the job"
    app.schedules.enable(topic="mail_schedules", partitions=1, allowed_topics=["audit"])
    assert app.schedules.topic == "mail_schedules"
    assert _schedule_routes(app) == [("mail_schedules", 1)], "the default route replaced"
    assert app.schedules.allows("audit")
    app.schedules.enable(topic="mail_schedules", partitions=1, allowed_topics=["audit"])
    with pytest.raises(ConfigurationError, match="called twice with other settings"):
        app.schedules.enable(topic="other_schedules")
    assert _schedule_routes(app) == [("mail_schedules", 1)]


def test_schedules_enabled_by_the_app_first_stay_as_they_are() -> None:
    app = make_app()
    app.schedules.enable(topic="own_schedules", partitions=1)

    @app.job(queue="mail")
    def send(address: str) -> None:
        pass

    assert _schedule_routes(app) == [("own_schedules", 1)]
    with pytest.raises(ConfigurationError, match="called twice with other settings"):
        app.schedules.enable()


def test_the_same_schedules_enabled_after_a_job_keep_their_route() -> None:
    app = make_app()

    @app.job(queue="mail")
    def send(address: str) -> None:
        pass

    route = next(iter(r for r in app.routes if r.name == app.schedules.topic))
    app.schedules.enable()
    assert next(iter(r for r in app.routes if r.name == app.schedules.topic)) is route


def test_a_queue_commits_its_offsets_every_commit_interval() -> None:
    app = make_app()
    app.jobs.queue("fast")
    app.jobs.queue("slow", commit_interval=2)
    routes = {route.name: route for route in app.routes}
    assert routes["jobs-fast"].kafka["auto.commit.interval.ms"] == 100
    assert routes["jobs-fast"].max_wait_time == pytest.approx(0.1), "an idle queue commits too"
    assert routes["jobs-slow"].kafka["auto.commit.interval.ms"] == 2000
    assert routes["jobs-slow"].max_wait_time == pytest.approx(1.0), "the app's, if shorter"
    for bad in (0, -1, 61, "1", True):
        with pytest.raises(ConfigurationError, match="commit_interval"):
            app.jobs.queue(f"bad-{bad}", commit_interval=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["x", "0", "-1", "1.5", "", "²"])
def test_a_malformed_attempt_header_makes_the_job_die_saying_so(value: str) -> None:
    app = make_app()
    ran: list[int] = []

    @app.job(queue="mail", name="send")
    def send(n: int) -> None:
        ran.append(n)

    consumer = testing.consumer_for(app, send.queue.topic)
    envelope, payload = encode("send", (1,), {})
    headers = [(NAME, "send"), (ID, envelope.id), (ATTEMPT, value)]
    testing.produce(consumer, payload, headers=headers)
    testing.consume(consumer)  # no exception: the batch does not fail (and retry forever)
    assert ran == []
    [dead] = _dead(app, send.queue.dead_topic)
    assert header(dead.raw_headers, DEAD_CLASS) == "ValueError"
    assert f"the {ATTEMPT} header is malformed" in (header(dead.raw_headers, DEAD_MESSAGE) or "")
    assert header(dead.raw_headers, ATTEMPT) is None, "its attempts are not known"
    assert testing.recorded(consumer).committed == 1, "moved past it"


@pytest.mark.parametrize(
    "body",
    [b'{"job": "send", "args": [1], "enqueued_at": "yesterday"}',
     b'{"job": "send", "args": [1], "enqueued_at": 1e300}', b"not json", b'{"args": []}'],
)  # fmt: skip
def test_a_malformed_envelope_makes_the_job_die_saying_so(body: bytes) -> None:
    app = make_app()

    @app.job(queue="mail", name="send")
    def send(n: int) -> None:
        raise AssertionError("never runs")

    consumer = testing.consumer_for(app, send.queue.topic)
    testing.produce(consumer, body, headers=[(NAME, "send"), (ATTEMPT, "1")])
    testing.consume(consumer)
    [dead] = _dead(app, send.queue.dead_topic)
    assert header(dead.raw_headers, DEAD_CLASS) in ("ValueError", "JSONDecodeError", "DecodeError")
    assert header(dead.raw_headers, ATTEMPT) == "1"
    assert testing.recorded(consumer).committed == 1
