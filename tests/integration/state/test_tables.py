"""Tables against the real broker: a route's consumer looks up the table partition of its
message's partition, restored from the table's topic before the partition's first batch (no
lookup misses a row the topic held) and following the topic after; a table with another
partition count than its stream stops the app at start."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer, Producer
from helpers import running

ROWS = 500


def test_lookups_see_the_whole_table_from_the_first_batch_and_its_changes_after(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    customers = new_topic(partitions=2, config={"cleanup.policy": "compact"})
    orders = new_topic(partitions=2)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:  # one partitioner: both
        producer.produce_many_sync(
            [{"topic": customers, "key": f"c-{n}", "payload": {"name": f"n{n}"}}
             for n in range(ROWS)]
            + [{"topic": orders, "key": f"c-{n}", "payload": {"id": n}} for n in range(ROWS)]
        )  # fmt: skip
    seen: dict[str, Any] = {}
    changed = threading.Event()

    class Looks(Consumer):
        def consume(self) -> None:
            table = self.tables[customers]
            for message in self.messages:
                seen[message.key] = table.get(message.key)
                if seen[message.key] == {"name": "changed"}:
                    changed.set()

    app = App(
        client_id="tables",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}",
               "auto.offset.reset": "earliest"},
        max_wait_time=0.2, state_dir=str(tmp_path / "state"),
    )  # fmt: skip
    app.routes.table(customers)
    app.routes.topic(orders, Looks, tables=[customers])
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        deadline = time.monotonic() + 60
        while len(seen) < ROWS:
            assert time.monotonic() < deadline, f"{len(seen)} of {ROWS} orders looked up"
            threading.Event().wait(0.05)  # the app's workers fill seen: nothing to wait on
        missing = [key for key, row in seen.items() if row != {"name": f"n{key[2:]}"}]
        assert missing == [], "each lookup found its row: the table was read before the batch"
        producer.produce_sync(topic=customers, key="c-7", payload={"name": "changed"})
        for attempt in range(100):  # the table follows its topic a moment behind
            producer.produce_sync(topic=orders, key="c-7", payload={"id": 7, "attempt": attempt})
            if changed.wait(0.1):
                break
        assert changed.is_set(), f"c-7 still looked up as {seen['c-7']}"


def test_a_table_partitioned_otherwise_than_its_stream_stops_the_app_at_start(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    customers = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    orders = new_topic(partitions=2)

    class Looks(Consumer):
        def consume(self) -> None:
            pass

    app = App(
        client_id="tables",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}"},
        state_dir=str(tmp_path / "state"),
    )
    app.routes.table(customers)
    app.routes.topic(orders, Looks, tables=[customers])
    with pytest.raises(ConfigurationError, match="co-partitioned"):
        app.start()
    app.stop_and_wait()


def test_a_global_table_is_read_whole_by_every_partition_and_followed(
    kafka_bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    countries = new_topic(partitions=3, config={"cleanup.policy": "compact"})
    orders = new_topic(partitions=2)  # not co-partitioned: a global table does not ask it
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [{"topic": countries, "key": f"k{n}", "payload": {"country": n}} for n in range(60)]
            + [{"topic": orders, "key": f"o{n}", "payload": {"country": f"k{n}"}}
               for n in range(60)]
        )  # fmt: skip
    seen: dict[str, Any] = {}
    changed = threading.Event()

    class Looks(Consumer):
        def consume(self) -> None:
            table = self.tables["countries"]
            for message in self.messages:
                seen[message.key] = table.get(message.payload["country"])
                if seen[message.key] == {"country": "changed"}:
                    changed.set()

    app = App(
        client_id="tables",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}",
               "auto.offset.reset": "earliest"},
        max_wait_time=0.2, state_dir=str(tmp_path / "state"),
    )  # fmt: skip
    app.routes.table(countries, name="countries", global_table=True)
    app.routes.topic(orders, Looks, tables=["countries"])
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        deadline = time.monotonic() + 60
        while len(seen) < 60:
            assert time.monotonic() < deadline, f"{len(seen)} of 60 orders looked up"
            threading.Event().wait(0.05)  # the app's workers fill seen: nothing to wait on
        assert {key: row["country"] for key, row in seen.items()} == {
            f"o{n}": n for n in range(60)
        }, "every partition found rows of every partition of the table"
        producer.produce_sync(topic=countries, key="k5", payload={"country": "changed"})
        for attempt in range(100):  # the table follows its topic a moment behind
            producer.produce_sync(topic=orders, key=f"again-{attempt}", payload={"country": "k5"})
            if changed.wait(0.1):
                break
        assert changed.is_set(), "the global table follows its topic"
