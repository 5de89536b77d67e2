"""The app makes each feature when it is first read, not when it is built (``import conveyor``
loads none of them: ``tests/test_imports.py``), and a feature that hooks producers (tracing,
latency stamps, the schedules topic) hooks the app's producers whichever comes first."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.sdk.trace import TracerProvider

import conveyor
from conveyor import App, testing
from conveyor.tracing.latency import PRODUCED_AT

FEATURES = ("tracing", "latency", "metrics", "web", "schedules", "jobs", "liveness")


def new_app() -> App:
    app = App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:1"})
    testing.clear(app)  # the app's producers capture: no broker
    return app


def test_an_app_makes_no_feature_until_it_is_read_and_then_one() -> None:
    app = new_app()
    assert [name for name in FEATURES if name in vars(app)] == []
    for name in FEATURES:
        assert getattr(app, name) is getattr(app, name)
    assert app.web.metrics is app.metrics
    assert app.web.latency is app.latency


def test_threads_reading_a_feature_first_at_once_get_the_same_one() -> None:
    app = new_app()
    start = threading.Barrier(8)
    seen = []

    def read() -> None:
        start.wait()
        seen.append(app.jobs)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(jobs) for jobs in seen}) == 1
    assert seen[0] is app.jobs


def test_a_producer_made_before_latency_is_read_is_stamped_once_it_is_enabled() -> None:
    app = new_app()
    early = app.producer
    assert "latency" not in vars(app)
    app.latency.enable()
    early.produce_sync(topic="orders", payload=b"x")
    assert PRODUCED_AT in testing.produced(app, "orders")[0].headers


def test_a_producer_made_after_the_features_has_their_hooks_in_one_order() -> None:
    """Tracing's hook runs before latency's on every producer of the app, whichever feature
    was read or enabled first (so its headers come in one order)."""
    app = new_app()
    app.latency.enable()
    app.tracing.enable(tracer_provider=TracerProvider())
    app.producer.produce_sync(topic="orders", payload=b"x")
    app.transactional_producer.produce_sync(topic="orders", payload=b"y")
    for message in testing.produced(app, "orders"):
        assert list(message.headers) == ["traceparent", PRODUCED_AT]


def test_a_producer_writes_to_the_apps_schedules_topic_though_schedules_were_never_read() -> None:
    app = new_app()
    assert app.producer.schedules_topic == "shop_schedules"
    assert "schedules" not in vars(app)
    app.schedules.enable(topic="shop-timers")  # made now: the producer made before follows
    assert app.producer.schedules_topic == "shop-timers"


def test_the_names_the_package_loads_on_first_use_are_its_own() -> None:
    for name in ("Admin", "Iterator", "Delay", "Expire", "Filter", "Throttle", "Verdict"):
        assert name in dir(conveyor)
        assert getattr(conveyor, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        conveyor.Nothing  # type: ignore[attr-defined] # noqa: B018
