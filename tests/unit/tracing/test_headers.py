"""W3C traceparent parsing and the header carrier, by the specification's rules."""

from __future__ import annotations

import pytest

from conveyor.tracing.headers import (
    HeadersGetter,
    HeadersSetter,
    parse_traceparent,
    traceparent_of,
    unsampled_traceparent,
    without_context,
)

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_traceparent_parses_as_str_or_bytes() -> None:
    expected = (0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1)
    assert parse_traceparent(VALID) == expected
    assert parse_traceparent(VALID.encode()) == expected


UNSAMPLED = VALID[:-2] + "00"
MALFORMED = [
    None,
    "",
    "garbage",
    VALID.upper(),  # upper-case hex is invalid
    "ff" + VALID[2:],  # version ff is forbidden
    VALID + "-extra",  # version 00 is exactly 55 characters
    "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # all-zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",  # all-zero span id
    VALID.replace("-", "_"),
    "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    b"\xff" * 55,
    "01" + VALID[2:] + "x",  # a later version may add fields, but after a dash
]


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_traceparents_are_none(value: object) -> None:
    assert parse_traceparent(value) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        *MALFORMED,
        *(value[:-2] + "00" for value in MALFORMED if type(value) is str and len(value) > 2),
        UNSAMPLED + "\n",
        "01" + UNSAMPLED[2:],  # a later version: parsed, not copied (it is written as 00)
        "01" + UNSAMPLED[2:] + "-more",
        VALID,
        VALID[:-2] + "03",
        VALID[:-2] + "ff",
        UNSAMPLED[:-2] + "0A",
    ],
)
def test_only_a_valid_version_00_unsampled_traceparent_is_carried_as_it_came(
    value: object,
) -> None:
    assert unsampled_traceparent(value) is False  # type: ignore[arg-type]
    if isinstance(value, str):
        assert unsampled_traceparent(value.encode()) is False


@pytest.mark.parametrize(
    "value", [UNSAMPLED, UNSAMPLED[:-2] + "02", UNSAMPLED[:-2] + "fe", UNSAMPLED[:-2] + "a0"]
)
def test_a_valid_unsampled_traceparent_is_carried_as_it_came(value: str) -> None:
    parsed = parse_traceparent(value)
    assert parsed is not None
    assert not parsed[2] & 1
    assert unsampled_traceparent(value) is True
    assert unsampled_traceparent(value.encode()) is True


def test_a_later_version_may_append_fields() -> None:
    assert parse_traceparent("01" + VALID[2:] + "-more") is not None


def test_the_last_traceparent_header_wins() -> None:
    other = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    headers = [("traceparent", VALID.encode()), ("other", b"x"), ("traceparent", other.encode())]
    assert traceparent_of(headers) == (int("1" * 32, 16), int("2" * 16, 16), 1)
    assert traceparent_of(None) is None
    assert traceparent_of([("traceparent", b"junk")]) is None
    assert traceparent_of([("traceparent", VALID), ("traceparent", b"junk")]) is None, (
        "the last one is malformed: no context, as for a lone malformed one"
    )


def test_without_context_drops_every_context_header_and_keeps_the_rest() -> None:
    headers = [
        ("a", b"1"),
        ("traceparent", b"x"),
        ("tracestate", b"y"),
        ("baggage", b"z"),
        ("a", b"2"),
    ]
    assert without_context(headers) == [("a", b"1"), ("a", b"2")]
    assert without_context(None) == []


def test_the_getter_reads_ascii_values_and_the_setter_appends() -> None:
    getter, setter = HeadersGetter(), HeadersSetter()
    carrier: list[tuple[str, object]] = [("k", b"v1"), ("k", "v2"), ("x", None)]
    assert getter.get(carrier, "k") == ["v2"], "the last of a repeated name"
    assert getter.get([*carrier, ("k", b"\xff")], "k") is None, "the last is not ASCII"
    assert getter.get(carrier, "x") is None
    assert getter.get(None, "k") is None
    assert getter.keys(carrier) == ["k", "k", "x"]
    setter.set(carrier, "traceparent", VALID)
    assert carrier[-1] == ("traceparent", VALID)
