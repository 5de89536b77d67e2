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
