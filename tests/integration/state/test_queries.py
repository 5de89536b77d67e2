"""Interactive queries against the real broker: ``app.stores.get(store, key)`` answered from
this process's copy when it has the key's partition, and by the process that has it over the
web UI's command channel otherwise; a key nobody wrote gives the default."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from conveyor import App, Consumer, Producer
from conveyor.state import StateError, Store
from conveyor.web import WebTopics
from helpers import running


class Counts(Consumer):
    def consume(self) -> None:
        for message in self.messages:
            self.state[message.key] = self.state.get(message.key, 0) + 1


def _app(bootstrap: str, group: str, topic: str, folder: Path, name: str) -> App:
    app = App(
        client_id="queries",
        kafka={"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"},
        max_wait_time=0.1, state_dir=str(folder), state_flush_interval=0.1, instance_id=name,
    )  # fmt: skip
    app.routes.topic(topic, Counts, state=Store(backend="rocksdb"))
    return app


def _counted(app: App, key: str) -> Any:
    """The key's count, or ``None`` while its partition is not open anywhere yet."""
    try:
        return app.stores.get("default", key, timeout=1)
    except StateError:
        return None


def test_a_key_is_read_where_its_partition_is(
    kafka_bootstrap: str, new_topic: Any, web_topics: WebTopics, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    group = f"queries-{uuid.uuid4().hex[:8]}"
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": topic, "key": f"k{n % 4}", "payload": {"n": n}} for n in range(40)]
        )
    owner = _app(kafka_bootstrap, group, topic, tmp_path / "owner", "owner")
    owner.web.enable(topics=web_topics, aggregate=False)
    asker = _app(kafka_bootstrap, group, topic, tmp_path / "asker", "asker")  # never started
    asker.web.enable(topics=web_topics, aggregate=False, commands=False)
    with running(owner):
        deadline = time.monotonic() + 60
        while _counted(owner, "k3") != 10:  # flushed every 0.1 s
            assert time.monotonic() < deadline, _counted(owner, "k3")
            threading.Event().wait(0.1)  # the owner's workers count: nothing to wait on
        assert {key: owner.stores.get("default", key) for key in ("k0", "k1", "k2")} == {
            "k0": 10, "k1": 10, "k2": 10
        }  # fmt: skip
        assert {key: asker.stores.get("default", key) for key in ("k0", "k1", "k2", "k3")} == {
            "k0": 10,
            "k1": 10,
            "k2": 10,
            "k3": 10,
        }, "the asker has no partition: the owner answered each over the command channel"
        assert asker.stores.get("default", "nobody", default=-1) == -1
    with pytest.raises(StateError, match="timed out"):
        asker.stores.get("default", "k0", timeout=1)  # the owner is gone
