"""A producer recovers from a fatal error by rebuilding its client, and variants send with
their own settings."""

from __future__ import annotations

import threading
import uuid

import pytest

from conveyor import Event, Monitor, Producer


def test_a_fenced_transactional_producer_reloads_and_carries_on(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    topic = new_topic()
    transactional_id = f"tx-{uuid.uuid4().hex}"
    settings = {"bootstrap.servers": kafka_bootstrap, "transactional.id": transactional_id}
    monitor = Monitor()
    seen: list[str] = []
    monitor.subscribe("producer.reloaded", lambda event: seen.append(event.name))
    errors: list[str] = []
    monitor.subscribe("error.occurred", lambda event: errors.append(event["type"]))
    with Producer(settings, monitor=monitor, reload_backoff=0.1) as first:
        first.produce_sync(topic=topic, payload=b"first-1")
        with Producer(settings) as second:  # same transactional.id: fences the first
            second.produce_sync(topic=topic, payload=b"second-1")
        delivered = False
        for _ in range(3):  # the fencing surfaces on the next call, the reload on the one after
            try:
                first.produce_sync(topic=topic, payload=b"first-2")
                delivered = True
                break
            except Exception:
                continue
        assert delivered
    assert seen == ["producer.reloaded"]
    assert errors.count("producer.fatal") == 1, "a fatal error is reported once"
    committed = read_messages(topic, 3, timeout=10, **{"isolation.level": "read_committed"})
    assert [m.value() for m in committed] == [b"first-1", b"second-1", b"first-2"]


def test_a_variant_sends_with_its_own_acks(kafka_bootstrap: str, new_topic, read_messages) -> None:
    """acks=0 on the variant only: the broker does not answer, so its reports carry no
    offset (None), while the producer's own (acks=all) do."""
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        fire_and_forget = producer.variant(acks=0)
        report = fire_and_forget.produce_sync(topic=topic, payload=b"via variant")
        assert report.offset is None, "no acknowledgement, no offset"
        assert producer.produce_sync(topic=topic, payload=b"via producer").offset == 1
    assert [m.value() for m in read_messages(topic, 2)] == [b"via variant", b"via producer"]


def test_statistics_reach_the_monitor(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    monitor = Monitor()
    statistics: list[dict] = []
    arrived = threading.Event()

    def on_statistics(event: Event) -> None:
        statistics.append(event["statistics"])
        arrived.set()

    monitor.subscribe("statistics.emitted", on_statistics)
    settings = {"bootstrap.servers": kafka_bootstrap, "statistics.interval.ms": 100}
    with Producer(settings, monitor=monitor) as producer:
        producer.produce_sync(topic=topic, payload=b"x")
        assert arrived.wait(10)
    assert statistics[0]["type"] == "producer"
    assert statistics[0]["client_id"] == producer.id


def _fence(settings: dict, topic: str) -> None:
    with Producer(settings) as other:  # the same transactional.id fences the first producer
        other.produce_sync(topic=topic, payload=b"fencer")


def _produce_through_fencing(producer: Producer, topic: str) -> None:
    """The fencing surfaces on one call, the reload on the next; raise what the last one raised."""
    for attempt in range(3):
        try:
            producer.produce_sync(topic=topic, payload=b"after")
            return
        except Exception:
            if attempt == 2:
                raise


def test_the_reload_budget_refills_after_a_calm_spell(kafka_bootstrap: str, new_topic) -> None:
    """max_reloads=1: a second fencing right after the first exhausts the budget, but a client
    that ran reload_calm seconds since its rebuild earns it back (a long-lived transactional
    producer fenced once a day must not fail for good on the eleventh day)."""
    topic = new_topic()
    settings = {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    reloads: list[int] = []
    monitor = Monitor()
    monitor.subscribe("producer.reloaded", lambda event: reloads.append(event["attempt"]))
    with Producer(settings, monitor=monitor, max_reloads=1, reload_backoff=0.05) as calm:
        calm.reload_calm = 0.0  # every rebuilt client counts as having run long enough
        for _ in range(2):
            calm.produce_sync(topic=topic, payload=b"before")
            _fence(settings, topic)
            _produce_through_fencing(calm, topic)
    assert reloads == [1, 1], "each fencing after a calm spell reloads as the first one did"

    settings["transactional.id"] = f"tx-{uuid.uuid4().hex}"
    with Producer(settings, max_reloads=1, reload_backoff=0.05) as restless:
        restless.produce_sync(topic=topic, payload=b"before")
        _fence(settings, topic)
        _produce_through_fencing(restless, topic)
        _fence(settings, topic)  # fenced again at once: the budget of one is spent
        with pytest.raises(Exception, match=r"(?i)fenc|fatal|epoch"):
            _produce_through_fencing(restless, topic)
