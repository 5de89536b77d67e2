"""``app.stores.get`` refuses a store no route (or more than one route) declares, before it
asks anything of the cluster."""

from __future__ import annotations

import pytest

from conveyor import App, ConfigurationError, Consumer
from conveyor.state import Store


class Counts(Consumer):
    def consume(self) -> None:
        pass


def test_a_query_names_one_declared_store() -> None:
    app = App(client_id="t", kafka={"bootstrap.servers": "127.0.0.1:9"})
    app.routes.topic("a", Counts, state=Store())
    app.routes.topic("b", Counts, state={"default": Store(), "seen": Store()})
    with pytest.raises(ConfigurationError, match="no route declares a store 'nope'"):
        app.stores.get("nope", "k")
    with pytest.raises(ConfigurationError, match=r"several routes \(a, b\)"):
        app.stores.get("default", "k")
    with pytest.raises(ConfigurationError, match="no route declares"):
        app.stores.get("seen", "k", topic="a")
