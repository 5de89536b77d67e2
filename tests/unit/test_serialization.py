"""JSON encoding is the same with orjson and with the standard library."""

from __future__ import annotations

import pytest

from conveyor import serialization


@pytest.mark.parametrize("use_orjson", [True, False])
def test_json_round_trip(monkeypatch: pytest.MonkeyPatch, use_orjson: bool) -> None:
    if not use_orjson:
        monkeypatch.setattr(serialization, "_orjson", None)
    value = {"order": 1, "items": ["a", "é"], "paid": True, "total": 2.5, "note": None}
    encoded = serialization.json_dumps(value)
    assert isinstance(encoded, bytes)
    assert encoded == b'{"order":1,"items":["a","\xc3\xa9"],"paid":true,"total":2.5,"note":null}'
    assert serialization.json_loads(encoded) == value


def test_big_integers_fall_back_to_the_standard_library() -> None:
    assert serialization.json_dumps({"n": 2**70}) == b'{"n":1180591620717411303424}'


def test_kept_copies_the_encoded_bytes() -> None:
    encoded = serialization.json_dumps([1, "a"])
    copy = serialization.kept(encoded)
    assert copy == b'[1,"a"]'
    assert copy is not encoded  # orjson's result holds a buffer of 4 KB or more; the copy does not


def test_canonical_json_sorts_object_keys_and_writes_tuples_as_arrays() -> None:
    assert serialization.canonical_json((1000, 2000, "é")) == b'[1000,2000,"\xc3\xa9"]'
    assert serialization.canonical_json({"b": 1, "a": [2]}) == b'{"a":[2],"b":1}'
