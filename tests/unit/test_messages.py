"""Consumed messages decode lazily; dead letter and piped copies say where they came from."""

from __future__ import annotations

import pytest

from conveyor.errors import DeserializationError
from conveyor.messages import (
    Deserializers,
    Message,
    Messages,
    dead_letter_message,
    piped_message,
)
from unit.processing.fakes import FakeRaw


def raw(offset: int = 3, **fields: object) -> FakeRaw:
    values = {"value": b'{"n":1}', "key": b"k", "headers": [("trace", b"t")], **fields}
    return FakeRaw(offset, partition=1, **values)  # type: ignore[arg-type]


def test_payloads_decode_on_first_access_only() -> None:
    calls: list[bytes] = []

    def decode(value: bytes) -> str:
        calls.append(value)
        return value.decode()

    message = Message(raw(), Deserializers(payload=decode))
    assert not message.deserialized
    assert message.payload == '{"n":1}'
    assert message.payload == '{"n":1}'
    assert calls == [b'{"n":1}']
    assert message.key == "k"
    assert message.headers == {"trace": b"t"}


def test_a_tombstone_stays_none() -> None:
    message = Message(raw(value=None), Deserializers())
    assert message.tombstone
    assert message.payload is None


def test_messages_are_one_partitions_batch() -> None:
    batch = Messages([raw(1), raw(2), raw(3)], Deserializers(), "orders", 1, consumer_lag=4)
    assert len(batch) == 3
    assert (batch.first.offset, batch.last.offset) == (1, 3)
    assert [m.offset for m in batch[1:]] == [2, 3]
    assert batch.payloads == [{"n": 1}] * 3
    assert batch.consumer_lag == 4


def test_dead_letter_copy() -> None:
    error = ValueError("bad json")
    copy = dead_letter_message(Message(raw(), Deserializers()), "dlq", "billing", 2, error)
    headers = dict(copy["headers"])
    assert (copy["topic"], copy["payload"], copy["key"]) == ("dlq", b'{"n":1}', b"k")
    assert headers["trace"] == b"t"
    assert headers["original_topic"] == "orders"
    assert headers["original_partition"] == "1"
    assert headers["original_offset"] == "3"
    assert headers["original_timestamp"] == "1700000000000"
    assert headers["original_consumer_group"] == "billing"
    assert headers["original_attempts"] == "2"
    assert headers["original_error_class"] == "ValueError"
    assert "ValueError: bad json" in headers["original_error_backtrace"]


def test_dead_letter_copy_without_an_error() -> None:
    copy = dead_letter_message(Message(raw(key=None), Deserializers()), "dlq", "g", 0, None)
    headers = dict(copy["headers"])
    assert headers["original_key"] == b""
    assert headers["original_error_class"] == ""


def test_piped_copy() -> None:
    copy = piped_message(Message(raw(), Deserializers()), "out", "billing")
    assert (copy["topic"], copy["payload"], copy["key"]) == ("out", b'{"n":1}', b"k")
    assert copy["headers"] == [
        ("trace", b"t"),
        ("source_topic", "orders"),
        ("source_partition", "1"),
        ("source_offset", "3"),
        ("source_consumer_group", "billing"),
    ]


def test_a_payload_that_cannot_be_decoded_names_the_message() -> None:
    message = Message(raw(7, value=b"{not json"), Deserializers())
    with pytest.raises(DeserializationError) as raised:
        message.payload  # noqa: B018
    error = raised.value
    assert (error.part, error.topic, error.partition, error.offset) == ("payload", "orders", 1, 7)
    assert "orders/1@7" in str(error)
    assert "with JSON" in str(error), "the deserializer named as a person reads it"
    assert isinstance(error, ValueError), "still a ValueError for code that catches those"


def test_a_key_that_cannot_be_decoded_names_the_message() -> None:
    def strict(raw: bytes) -> str:
        return raw.decode("ascii")

    message = Message(raw(8, key=b"\xff"), Deserializers(key=strict))
    with pytest.raises(DeserializationError, match=r"key of orders/1@8 with .*strict"):
        message.key  # noqa: B018


def test_a_batch_s_payloads_decode_in_one_pass_once_and_messages_reuse_them() -> None:
    calls: list[bytes] = []

    def decode(value: bytes) -> str:
        calls.append(value)
        return value.decode().upper()

    batch = Messages(
        [raw(1, value=b"a"), raw(2, value=None), raw(3, value=b"c")],
        Deserializers(payload=decode), "t", 1,
    )  # fmt: skip
    assert batch.payloads == ["A", None, "C"], "a tombstone stays None"
    assert batch.payloads is batch.payloads, "kept: asked again, decoded no more"
    assert [m.payload for m in batch] == ["A", None, "C"]
    assert all(m.deserialized for m in batch)
    assert calls == [b"a", b"c"], "each payload decoded once, tombstones not at all"


def test_a_batch_s_payloads_build_no_message_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch path decodes from the raw messages: no Message wrapper is made for it."""
    raws = [raw(offset, value=b"[1]") for offset in range(50)]
    built: list[object] = []  # the Messages made of this batch's raws (other threads aside)
    original = Message.__init__

    def counting(self: Message, first: object, *args: object, **kwargs: object) -> None:
        if any(first is one for one in raws):
            built.append(first)
        original(self, first, *args, **kwargs)  # type: ignore[arg-type]

    batch = Messages(raws, Deserializers(), "t", 1)
    monkeypatch.setattr(Message, "__init__", counting)
    assert batch.payloads == [[1]] * 50
    assert built == []


def test_a_batch_payload_that_cannot_be_decoded_names_its_message() -> None:
    batch = Messages([raw(7), raw(8, value=b"{not json")], Deserializers(), "t", 1)
    with pytest.raises(DeserializationError) as failed:
        batch.payloads  # noqa: B018
    assert failed.value.offset == 8
    assert "orders/1@8" in str(failed.value)
    assert [m.offset for m in batch] == [7, 8], "the batch itself is unchanged"


def test_a_batch_s_keys_decode_once_per_distinct_key() -> None:
    calls: list[bytes] = []

    def decode(value: bytes) -> str:
        calls.append(value)
        return value.decode().upper()

    batch = Messages(
        [raw(1, key=b"a"), raw(2, key=None), raw(3, key=b"b"), raw(4, key=b"a")],
        Deserializers(key=decode), "t", 1,
    )  # fmt: skip
    assert batch.keys == ["A", None, "B", "A"], "a message without a key: None"
    assert sorted(calls) == [b"a", b"b"], "each distinct key decoded once"
    assert [m.key for m in batch] == ["A", None, "B", "A"]


def test_default_keys_decode_as_utf8_batch_after_batch() -> None:
    """The default key deserializer remembers what it decoded lately (the same ``str`` for a
    key that comes again): each batch's keys are still its own, text that is not UTF-8 is
    replaced, not refused, and a message without a key has ``None``."""
    first = Messages(
        [raw(1, key=b"a"), raw(2, key=None), raw(3, key=b"\xff")], Deserializers(), "t", 1
    )
    again = Messages(
        [raw(4, key=b"\xff"), raw(5, key=b"b"), raw(6, key=b"a")], Deserializers(), "t", 1
    )
    assert first.keys == ["a", None, "\ufffd"]
    assert again.keys == ["\ufffd", "b", "a"]
    assert again.keys[2] is first.keys[0], "a key that comes again is the same str"
    assert [m.key for m in again] == ["\ufffd", "b", "a"]


def test_a_batch_key_that_cannot_be_decoded_names_its_message() -> None:
    def decode(value: bytes) -> int:
        return int(value)

    batch = Messages([raw(7, key=b"1"), raw(8, key=b"x")], Deserializers(key=decode), "t", 1)
    with pytest.raises(DeserializationError) as failed:
        batch.keys  # noqa: B018
    assert failed.value.offset == 8
