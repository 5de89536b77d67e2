"""Two apps on one cluster, each enabling scheduled messages without naming a topic, each with
its own producer: each app's schedules go to a topic of its own, and each app dispatches its
own, never the other's (with the one topic they used to share, each loaded the other's
schedules, refused them as not routed and tombstoned them: neither arrived).

The markers are turns, not pauses: A's first schedule fires in A, then B's fires in B (so B
had read its topic past where A's would have been), then A's second fires in A; only then
are the dispatches, refusals and arrivals of both apps compared."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from conveyor import Admin, App, Consumer
from conveyor.admin import migrate
from helpers import Record, running


def new_app(bootstrap: str, name: str, target: str, arrived: Record, sent: Record) -> App:
    """An app named ``name`` (its consumer group too) that routes ``target`` into ``arrived``
    and notes each schedule it dispatches in ``sent``; its schedules topic is its default."""

    class Arrivals(Consumer):
        def consume(self) -> None:
            arrived.add(*(m.raw_payload.decode() for m in self.messages))

    app = App(client_id=name, max_wait_time=0.1,
              kafka={"bootstrap.servers": bootstrap, "session.timeout.ms": 6_000})  # fmt: skip
    app.routes.topic(target, Arrivals)
    app.schedules.enable(partitions=1)  # no topic named: the app's own
    app.monitor.subscribe("schedule.dispatched", lambda event: sent.add(event["id"]))
    return app


@pytest.fixture
def names(kafka_admin: Admin) -> Iterator[tuple[str, str]]:
    """Two app names of this test; their schedules topics and groups are removed after."""
    suffix = uuid.uuid4().hex[:8]
    found = (f"sched-alpha-{suffix}", f"sched-beta-{suffix}")
    yield found
    for name in found:
        if f"{name}_schedules" in kafka_admin.list_topics():
            kafka_admin.delete_topic(f"{name}_schedules")


def test_two_apps_on_one_cluster_each_dispatch_only_their_own_schedules(
    kafka_bootstrap: str, new_topic: Any, names: tuple[str, str]
) -> None:
    arrived_a, arrived_b, sent_a, sent_b = Record(), Record(), Record(), Record()
    target_a, target_b = new_topic(), new_topic()
    alpha = new_app(kafka_bootstrap, names[0], target_a, arrived_a, sent_a)
    beta = new_app(kafka_bootstrap, names[1], target_b, arrived_b, sent_b)
    for app in (alpha, beta):
        migrate(app.admin, app.routes)
    with ExitStack() as both:
        for app in (alpha, beta):
            both.enter_context(running(app))
        first = alpha.producer.produce_at(time.time() + 1, topic=target_a, payload=b"alpha-1")
        assert arrived_a.wait_for(lambda items: "alpha-1" in items), "A's fires in A"
        second = beta.producer.produce_at(time.time(), topic=target_b, payload=b"beta-1")
        assert arrived_b.wait_for(lambda items: "beta-1" in items), "then B's in B"
        third = alpha.producer.produce_at(time.time(), topic=target_a, payload=b"alpha-2")
        assert arrived_a.wait_for(lambda items: "alpha-2" in items), "then A's again in A"
        assert sent_a.wait_for(lambda ids: third in ids), "A dispatched its second"
    assert sent_a.items == [first, third], "A dispatched its own, and only those"
    assert sent_b.items == [second], "B dispatched its own, never A's"
    assert (alpha.schedules.refused, beta.schedules.refused) == (0, 0), "neither saw the other's"
    # sets: a consumer is at least once (a rebalance may hand it a message again)
    assert set(arrived_a.items) == {"alpha-1", "alpha-2"}
    assert set(arrived_b.items) == {"beta-1"}
    assert (alpha.schedules.topic, beta.schedules.topic) == (
        f"{names[0]}_schedules", f"{names[1]}_schedules"
    )  # fmt: skip
