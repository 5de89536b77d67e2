"""Cron expressions: fields, ranges, lists, steps and names; the day-of-month / day-of-week
rule; an optional seconds field; malformed ones named."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor.errors import ConfigurationError
from conveyor.schedules.cron import Cron


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/5 * * * *", "2026-11-25T10:02:30", "2026-11-25T10:05:00"),
        ("*/5 * * * *", "2026-11-25T10:05:00", "2026-11-25T10:10:00"),
        ("0 9 * * mon-fri", "2026-11-27T10:00:00", "2026-11-30T09:00:00"),  # Friday -> Monday
        ("30 2 1 * *", "2026-11-25T00:00:00", "2026-12-01T02:30:00"),
        ("0 0 1 jan *", "2026-11-25T00:00:00", "2027-01-01T00:00:00"),
        ("0 12 13 * 5", "2026-11-25T00:00:00", "2026-11-27T12:00:00"),  # the 13th OR a Friday
        ("0 0 * * 7", "2026-11-25T00:00:00", "2026-11-29T00:00:00"),  # 7 is Sunday
        ("15,45 8-10/2 * * *", "2026-11-25T08:50:00", "2026-11-25T10:15:00"),
        ("*/2 * * * * *", "2026-11-25T10:00:01", "2026-11-25T10:00:02"),
        ("10 * * * * *", "2026-11-25T10:00:10", "2026-11-25T10:01:10"),
        ("0 0 29 feb *", "2026-03-01T00:00:00", "2028-02-29T00:00:00"),
        ("0 0 */2 * 1", "2026-11-25T00:00:00", "2026-12-07T00:00:00"),  # */2 restricts: AND
    ],
)
def test_the_next_time(expression: str, after: str, expected: str) -> None:
    assert Cron.parse(expression).next_after(at(after)) == at(expected)


@pytest.mark.parametrize(
    "expression",
    ["* * * *", "60 * * * *", "* 24 * * *", "*/0 * * * *", "5-1 * * * *", "* * * foo *",
     "0 0 30 feb *", "a b c d e", "", "* * * * * * *"],
)  # fmt: skip
def test_a_malformed_expression_is_named(expression: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Cron.parse(expression)
    assert refused.value.setting == "cron"


def test_a_schedule_without_a_payload_and_one_in_milliseconds() -> None:
    from conveyor.schedules.wire import NULL, schedule_message  # noqa: PLC0415

    _id, message = schedule_message(1_800_000_000, topic="t")
    assert message["payload"] == b""
    assert (NULL, b"") in message["headers"], "not a null value: that would read as cancelled"
    with pytest.raises(ConfigurationError) as refused:
        schedule_message(1_800_000_000_000, topic="t")  # milliseconds given as seconds
    assert refused.value.setting == "when"
