"""A route's own Kafka settings, against real brokers: a route with its own consumer setting
gets a listener of its own and reads as that setting says (read_uncommitted sees an aborted
transaction's messages, its neighbour does not), and a route with another bootstrap.servers
reads another cluster (a second development broker) while the app's other routes read the
first; the other cluster's group holds its offsets."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import ClassVar

import pytest

from conveyor import Admin, App, Consumer, Producer
from helpers import running


class Seen(Consumer):
    seen: ClassVar[list[tuple[str, str]]] = []
    changed: ClassVar[threading.Condition] = threading.Condition()

    def consume(self) -> None:
        with self.changed:
            self.seen.extend((m.topic, m.raw_payload.decode()) for m in self.messages)
            self.changed.notify_all()


def wait_seen(check: Callable[[list[tuple[str, str]]], bool], timeout: float = 60) -> None:
    with Seen.changed:
        assert Seen.changed.wait_for(lambda: check(Seen.seen), timeout), Seen.seen


def test_a_route_with_its_own_consumer_setting_reads_as_it_says(
    kafka_bootstrap: str, new_topic
) -> None:
    committed_only, everything = new_topic(), new_topic()
    Seen.seen = []
    app = App(client_id="own", kafka={"bootstrap.servers": kafka_bootstrap,
                                      "group.id": f"g-{uuid.uuid4().hex[:8]}"},
              max_wait_time=0.2)  # fmt: skip
    app.routes.topic(committed_only, Seen)
    app.routes.topic(everything, Seen, kafka={"isolation.level": "read_uncommitted"})
    transactional = Producer({"bootstrap.servers": kafka_bootstrap,
                              "transactional.id": f"t-{uuid.uuid4().hex}"})  # fmt: skip
    try:
        with running(app):
            listeners = {state.name for state in app.snapshot().listeners}
            assert len(listeners) == 2, listeners
            try:
                with transactional.transaction():
                    for topic in (committed_only, everything):
                        transactional.produce_sync(topic=topic, payload="aborted")
                    raise RuntimeError("abort it")
            except RuntimeError:
                pass
            with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
                for topic in (committed_only, everything):
                    producer.produce_sync(topic=topic, payload="after")
            wait_seen(lambda seen: {(committed_only, "after"), (everything, "after")} <= set(seen))
    finally:
        transactional.close()
    assert (everything, "aborted") in Seen.seen, "read_uncommitted: the aborted one is read"
    assert (committed_only, "aborted") not in Seen.seen, "the app's read_committed default"


@pytest.mark.xdist_group("brokers")  # see tests/conftest.py
def test_a_route_with_its_own_bootstrap_servers_reads_another_cluster(
    kafka_bootstrap: str, new_topic, own_bootstrap: str
) -> None:
    other = own_bootstrap
    here, there = new_topic(), f"there-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": other}) as admin:
        admin.create_topic(there, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    Seen.seen = []
    app = App(client_id="two", kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group},
              max_wait_time=0.2)  # fmt: skip
    app.routes.topic(here, Seen)
    app.routes.topic(there, Seen, kafka={"bootstrap.servers": other})
    with running(app):
        for bootstrap, topic in ((kafka_bootstrap, here), (other, there)):
            with Producer({"bootstrap.servers": bootstrap}) as producer:
                producer.produce_sync(topic=topic, payload=f"on {bootstrap}")
        wait_seen(
            lambda seen: {(here, f"on {kafka_bootstrap}"), (there, f"on {other}")} <= set(seen)
        )
    with Admin({"bootstrap.servers": other}) as admin:
        committed = {lag.partition: lag.committed for lag in admin.read_lags([group])}
    assert sum(offset or 0 for offset in committed.values()) == 1, committed
