"""The runner builds one listener per subscription group and never leaves threads behind when
a listener cannot be built."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from conveyor import App, ConfigurationError, Consumer, Monitor
from conveyor.processing.context import ProcessingContext
from conveyor.processing.runner import Runner
from unit.processing.fakes import settings


class Noop(Consumer):
    def consume(self) -> None:
        return None


def context(**kafka: Any) -> ProcessingContext:
    return ProcessingContext(
        settings=settings(kafka={"bootstrap.servers": "127.0.0.1:1", **kafka}),
        monitor=Monitor(),
        producer=lambda: None,  # type: ignore[arg-type, return-value]
        transactional_producer=lambda: None,  # type: ignore[arg-type, return-value]
        on_crash=lambda error, where: None,
    )


def test_one_listener_per_subscription_group() -> None:
    app = App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.routes.topic("orders", Noop)
    app.routes.topic("payments", Noop)
    with app.routes.subscription_group("slow"):
        app.routes.topic("reports", Noop)
    with app.routes.consumer_group("billing"):
        app.routes.topic("invoices", Noop)
    with app.routes.consumer_group("direct"):
        app.routes.topic("audit", Noop, assign=[0])
    app.routes.topic("latest", Noop, initial_offset="latest")
    runner = Runner(context(), app.routes.active())
    try:
        listeners = {(li.name, li.group_id): sorted(li.routes) for li in runner.listeners}
        assert listeners == {
            ("shop", "shop"): ["orders", "payments"],
            ("slow", "shop"): ["reports"],
            ("billing", "billing"): ["invoices"],
            ("direct-assigned", "direct"): ["audit"],
            ("shop-latest", "shop"): ["latest"],
        }
    finally:
        for listener in runner.listeners:
            listener.close()
        runner.pool.stop(1)


def test_a_listener_that_cannot_be_built_leaves_no_thread_running() -> None:
    """librdkafka refusing a setting stops the pool that was already started."""
    before = {thread.name for thread in threading.enumerate()}
    app = App(client_id="unit", kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.routes.topic("orders", Noop)
    with pytest.raises(ConfigurationError, match=r"session\.timeout\.ms"):
        Runner(context(**{"session.timeout.ms": "not a number"}), app.routes.active())
    after = {thread.name for thread in threading.enumerate() if thread.is_alive()}
    assert not {name for name in after - before if "worker" in name}
