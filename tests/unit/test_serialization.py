"""JSON encoding is the same with orjson and with the standard library."""

from __future__ import annotations

import ctypes

import orjson
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


def test_encoded_bytes_are_sized_to_their_content() -> None:
    # orjson's own result keeps its working buffer (4 KB or more, 8 KB for these); a batch's
    # payloads or a store's writes held so took that each. (600 bytes and more: allocated by
    # malloc, whose allocation glibc tells; smaller ones come from Python's own pools.)
    usable = ctypes.CDLL(None).malloc_usable_size
    usable.restype, usable.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    raw = orjson.dumps("x" * 600)
    assert usable(id(raw)) >= 4096  # what the copy is for
    encoded = serialization.json_dumps("x" * 600)
    key = serialization.canonical_json(("x" * 600,))
    assert 600 < usable(id(encoded)) < 1024
    assert 600 < usable(id(key)) < 1024


def test_canonical_json_sorts_object_keys_and_writes_tuples_as_arrays() -> None:
    assert serialization.canonical_json((1000, 2000, "é")) == b'[1000,2000,"\xc3\xa9"]'
    assert serialization.canonical_json({"b": 1, "a": [2]}) == b'{"a":[2],"b":1}'
