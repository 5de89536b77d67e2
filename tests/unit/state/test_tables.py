"""Tables without a broker: a route looks up ``self.tables[name]`` (read-only, apart from its
stores), the declarations refused with clear errors, and the co-partitioning check. Against
the broker: ``tests/integration/state/test_tables.py``."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer, testing
from conveyor.routing.topic import Topic
from conveyor.state import Store
from conveyor.state.changelogs import changelog_routes, check_co_partitioned


def app() -> App:
    return App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})


class Enrich(Consumer):
    def consume(self) -> None:
        customers = self.tables["customers"]
        for message in self.messages:
            self.state[message.key] = self.state.get(message.key, 0) + 1
            self.produce_async(
                topic="orders.enriched",
                key=message.key,
                payload={**message.payload, "customer": customers.get(message.key)},
            )


def test_a_consumer_looks_up_its_partition_of_the_table_beside_its_own_store() -> None:
    under_test = app()
    under_test.routes.table("customers")
    under_test.routes.topic("orders", Enrich, state=Store(), tables=["customers"])
    testing.capture(under_test)
    consumer = testing.consumer_for(under_test, "orders")
    testing.put_table(consumer, "customers", {"c-1": {"name": "Ada"}, "c-2": {"name": "Bo"}})
    testing.put_table(consumer, "customers", {"c-2": None})  # a tombstone deletes the row
    testing.produce(consumer, {"id": 1}, key="c-1")
    testing.produce(consumer, {"id": 2}, key="c-2")
    testing.consume(consumer)
    assert [m.payload for m in testing.produced(under_test, "orders.enriched")] == [
        {"id": 1, "customer": {"name": "Ada"}},
        {"id": 2, "customer": None},
    ]
    assert list(consumer.stores) == ["default"], "the table is not one of its stores"
    assert consumer.state["c-1"] == 1
    with pytest.raises(TypeError, match="read-only"):
        consumer.tables["customers"]["c-3"] = {"name": "Cy"}


def test_the_table_s_topic_is_its_changelog_and_is_declared_compacted() -> None:
    under_test = app()
    under_test.routes.table("customers", name="people")
    route = under_test.routes.topic("orders", Enrich, tables=["people"])
    assert route.state["people"].source == "customers"
    assert changelog_routes([route], {"orders": 3}) == [], "no changelog of its own"
    [declared] = [t for t in under_test.routes if t.name == "customers"]
    assert (declared.active, declared.config) == (False, {"cleanup.policy": "compact"})


@pytest.mark.parametrize(
    ("declare", "text"),
    [
        (lambda r: r.topic("orders", Enrich, tables=["nope"]), "no table 'nope'"),
        (lambda r: r.topic("orders", Enrich, tables="customers"), "list of table names"),
        (
            lambda r: r.topic("orders", Enrich, tables=["customers"], virtual_partitions=True),
            "virtual_partitions",
        ),
        (lambda r: r.table("customers"), "declared twice"),
        (lambda r: r.table("x", name="a b"), "name must be"),
        (
            lambda r: r.topic("orders", Enrich, state={"customers": Store()}, tables=["customers"]),
            "one name",
        ),
    ],
)
def test_a_malformed_table_declaration_is_refused(declare: Any, text: str) -> None:
    under_test = app()
    under_test.routes.table("customers")
    with pytest.raises(ConfigurationError, match=text):
        declare(under_test.routes)


def test_a_table_with_another_partition_count_than_its_stream_is_refused() -> None:
    store = Store(source="customers")
    route = Topic(
        name="orders", consumer_class=Enrich, consumer_group="g", subscription_group="g",
        state={"customers": store},
    )  # fmt: skip
    check_co_partitioned([route], {"orders": 4, "customers": 4})
    with pytest.raises(ConfigurationError, match="co-partitioned"):
        check_co_partitioned([route], {"orders": 4, "customers": 2})
    with pytest.raises(ConfigurationError, match="does not exist"):
        check_co_partitioned([route], {"orders": 4})


def test_a_global_table_asks_no_co_partitioning_and_needs_a_source() -> None:
    route = Topic(
        name="orders", consumer_class=Enrich, consumer_group="g", subscription_group="g",
        state={"countries": Store(source="countries", global_table=True)},
    )  # fmt: skip
    check_co_partitioned([route], {"orders": 4, "countries": 1})
    with pytest.raises(ConfigurationError, match="does not exist"):
        check_co_partitioned([route], {"orders": 4})
    with pytest.raises(ConfigurationError, match="only with a source"):
        Store(global_table=True)
    under_test = app()
    store = under_test.routes.table("countries", global_table=True)
    assert store.global_table
