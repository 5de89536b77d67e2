"""Outgoing messages are checked before librdkafka sees them; errors name the field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from conveyor.errors import InvalidMessageError
from conveyor.producer.messages import (
    check_message,
    check_topic,
    encode_headers,
    encode_key,
    encode_partition,
    encode_payload,
    encode_timestamp,
)
from conveyor.serialization import json_dumps


def test_payloads_pass_through_or_are_serialized() -> None:
    assert encode_payload(b"raw", json_dumps, 100) == b"raw"
    assert encode_payload("text", json_dumps, 100) == "text"
    assert encode_payload(None, json_dumps, 100) is None
    assert encode_payload({"a": [1, 2]}, json_dumps, 100) == b'{"a":[1,2]}'
    assert encode_payload(bytearray(b"ab"), json_dumps, 100) == b"ab"


def test_payload_over_the_limit_names_the_field() -> None:
    with pytest.raises(InvalidMessageError, match=r"payload is 101 bytes") as raised:
        encode_payload(b"x" * 101, json_dumps, 100)
    assert raised.value.field == "payload"
    with pytest.raises(InvalidMessageError, match=r"payload is 102 bytes"):
        encode_payload("é" * 51, json_dumps, 100)  # 51 characters, 102 UTF-8 bytes
    assert encode_payload("é" * 50, json_dumps, 100) == "é" * 50


def test_unserializable_payload_is_an_invalid_message() -> None:
    with pytest.raises(InvalidMessageError, match="could not be serialized") as raised:
        encode_payload(object(), json_dumps, 1000)
    assert raised.value.field == "payload"


@pytest.mark.parametrize("topic", [None, "", 42])
def test_topic_is_required(topic: object) -> None:
    with pytest.raises(InvalidMessageError) as raised:
        check_topic(topic)
    assert raised.value.field == "topic"


def test_keys_are_text_bytes_ints_uuids_or_models() -> None:
    assert encode_key("k") == "k"
    assert encode_key(b"k") == b"k"
    assert encode_key(7) == "7"
    assert encode_key(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    with pytest.raises(InvalidMessageError, match=r"key must be str, bytes, an int, .* got float"):
        encode_key(7.5)


def test_headers_as_dict_or_pairs_with_repeats() -> None:
    assert encode_headers({"a": "1", "b": b"2"}) == [("a", "1"), ("b", b"2")]
    assert encode_headers([("a", "1"), ("a", "2")]) == [("a", "1"), ("a", "2")]
    assert encode_headers(None) is None


@pytest.mark.parametrize(
    ("headers", "complaint"),
    [
        ({"a": 1}, "header 'a' must be str or bytes, got int"),
        ([("a",)], r"headers\[0\] must be a \(name, value\) pair"),
        ([(1, "x")], "header names must be str"),
        ("a=1", "headers must be a dict or a list"),
    ],
)
def test_bad_headers_are_named(headers: object, complaint: str) -> None:
    with pytest.raises(InvalidMessageError, match=complaint) as raised:
        encode_headers(headers)
    assert raised.value.field == "headers"


def test_partition_and_timestamp() -> None:
    assert encode_partition(None) == -1
    assert encode_partition(3) == 3
    with pytest.raises(InvalidMessageError, match="partition must be an integer >= 0"):
        encode_partition(-2)
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert encode_timestamp(moment) == int(moment.timestamp() * 1000)
    assert encode_timestamp(None) == 0
    with pytest.raises(InvalidMessageError, match="timezone-aware"):
        encode_timestamp(datetime(2026, 1, 2))


def test_message_dicts_reject_unknown_fields() -> None:
    with pytest.raises(InvalidMessageError, match="unknown message field") as raised:
        check_message({"topic": "t", "value": b"x"})
    assert raised.value.field == "value"
    with pytest.raises(InvalidMessageError, match="must be a dict"):
        check_message(["t", b"x"])
