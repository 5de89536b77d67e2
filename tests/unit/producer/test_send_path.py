"""A producer's variants send through the producer's own send path, and produce_unhurried
checks a message as produce_async does (nothing reaches a broker in these tests)."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import InvalidMessageError, Producer, ProducerClosedError

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 1000}


def test_a_variant_sends_through_its_producers_middleware_and_closes_with_it() -> None:
    producer = Producer(BOOTSTRAP)
    fast = producer.variant(acks=1)
    seen: list[str] = []

    def note(message: dict[str, Any]) -> None:
        seen.append(message["topic"])

    producer.middleware.append(note)  # added after the variant was made
    fast.produce_async(topic="through-the-variant", payload=b"x")
    producer.produce_unhurried({"topic": "unhurried", "payload": b"x"})
    assert seen == ["through-the-variant", "unhurried"]
    producer.close(0)
    with pytest.raises(ProducerClosedError):
        fast.produce_async(topic="through-the-variant", payload=b"x")
    with pytest.raises(ProducerClosedError):
        fast.produce_unhurried({"topic": "unhurried", "payload": b"x"})


def test_produce_unhurried_names_what_is_wrong_before_sending() -> None:
    with Producer(BOOTSTRAP) as producer:
        with pytest.raises(InvalidMessageError) as unknown:
            producer.produce_unhurried({"topic": "t", "payload": b"x", "colour": "red"})
        assert "colour" in str(unknown.value)
        with pytest.raises(InvalidMessageError) as topicless:
            producer.produce_unhurried({"payload": b"x"})
        assert topicless.value.field == "topic"
        handle = producer.produce_unhurried({"topic": "t", "payload": b"x", "label": 7})
        assert handle.label == 7
