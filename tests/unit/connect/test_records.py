"""A record as the sinks write it: ``record_json`` (a dict) and ``encoded_record`` (its bytes,
the payload encoded once with the record)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conveyor.connect.sinks.records import encoded_record, record_json
from conveyor.errors import DeserializationError
from conveyor.messages import Deserializers, Message
from unit.processing.fakes import FakeRaw


def record(value: bytes | None, deserializers: Deserializers | None = None) -> Message:
    return Message(FakeRaw(7, key=b"k", value=value), deserializers or Deserializers())


class Opaque:
    """What a custom deserializer may make: no JSON."""


def test_the_bytes_are_the_dict_encoded() -> None:
    for value in (b'{"n": 1, "text": "d\\u00e9j\\u00e0"}', b"[1, 2.5, null]", None):
        message = record(value)
        assert json.loads(encoded_record(message)) == record_json(message), value


def test_a_payload_its_deserializer_refuses_is_refused_by_both() -> None:
    message = record(b"not json")
    with pytest.raises(DeserializationError):
        record_json(message)
    with pytest.raises(DeserializationError):
        encoded_record(message)


def test_a_payload_that_is_no_json_goes_as_its_raw_bytes() -> None:
    opaque = Deserializers(payload=lambda raw: Opaque())
    message = record(b"\xff\x00", opaque)
    document = json.loads(encoded_record(message))
    assert document["payload"] == {"base64": "/wA="}
    assert document == record_json(message)
    assert json.loads(encoded_record(record(b"text", opaque)))["payload"] == "text"


def test_a_custom_encoder_is_used_as_given() -> None:
    def shape(message: Message) -> Any:
        return {"k": message.raw_key.decode() if message.raw_key else None}

    assert json.loads(encoded_record(record(b"{}"), shape)) == {"k": "k"}
