"""A wrong producer setting fails at construction and the error names it."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import ConfigurationError, Producer
from conveyor.producer.partitioners import murmur2

BOOTSTRAP = {"bootstrap.servers": "127.0.0.1:1"}  # nothing is sent in these tests


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"kafka": {}}, "bootstrap.servers"),
        ({"kafka": {**BOOTSTRAP, "no.such.setting": 1}}, "no.such.setting"),
        ({"kafka": {**BOOTSTRAP, "acks": "sometimes"}}, "acks"),
        ({"kafka": {**BOOTSTRAP, "partitioner": "dice"}}, "partitioner"),
        ({"kafka": BOOTSTRAP, "queue_full_timeout": 0}, "queue_full_timeout"),
        ({"kafka": BOOTSTRAP, "wait_timeout": "5"}, "wait_timeout"),
        ({"kafka": BOOTSTRAP, "max_reloads": -1}, "max_reloads"),
        ({"kafka": BOOTSTRAP, "serializer": "json"}, "serializer"),
        ({"kafka": BOOTSTRAP, "middleware": [42]}, "middleware"),
        ({"kafka": "127.0.0.1:9092"}, "kafka"),
    ],
)
def test_wrong_settings_are_named(kwargs: dict[str, Any], setting: str) -> None:
    kafka = kwargs.pop("kafka")
    with pytest.raises(ConfigurationError) as raised:
        Producer(kafka, **kwargs)
    assert raised.value.setting == setting
    assert setting in str(raised.value)


def test_defaults_keep_data() -> None:
    with Producer(BOOTSTRAP) as producer:
        assert producer.settings.kafka["acks"] == "all"
        assert producer.settings.kafka["enable.idempotence"] is True
        assert producer.settings.kafka["linger.ms"] == 0


def test_fewer_acks_turn_idempotence_off_unless_asked() -> None:
    with Producer({**BOOTSTRAP, "acks": 1}) as producer:
        assert producer.settings.kafka["enable.idempotence"] is False


def test_variants_allow_only_per_topic_settings() -> None:
    with Producer(BOOTSTRAP) as producer:
        with pytest.raises(ConfigurationError, match=r"cannot change bootstrap\.servers") as raised:
            producer.variant(**{"bootstrap.servers": "elsewhere:9092"})
        assert raised.value.setting == "bootstrap.servers"
        fast = producer.variant(acks=1)
        assert fast.settings == {"acks": 1}
        assert producer.variant(acks=1)._client is fast._client, "same settings share a client"


def test_murmur2_matches_the_java_client() -> None:
    # Reference values from Kafka's Utils.murmur2 test vectors.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
