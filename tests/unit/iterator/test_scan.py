"""The iterator's bounded topic reads: where a read starts (offset, time, newest) and what a
form may say, and where a read of a partition ends (its end, not its deadline)."""

from __future__ import annotations

import pytest

from conveyor.errors import ConfigurationError
from conveyor.iterator.scan import Start, TopicReader, parse_time, reader_settings
from unit.iterator.fakes import FakeClient
from unit.processing.fakes import FakeRaw


def test_a_start_is_one_of_offset_time_and_newest() -> None:
    assert Start.parse(None, None, None) == Start("newest", 50)
    assert Start.parse("12", "", None) == Start("offset", 12)
    assert Start.parse(None, None, "5") == Start("newest", 5)
    assert Start.parse(None, "2026-11-25T10:00:00+01:00", None) == Start(
        "time", parse_time("2026-11-25T09:00:00Z").timestamp()
    )
    assert parse_time("2026-11-25T09:00:00") == parse_time("2026-11-25T09:00:00+00:00"), "UTC"


@pytest.mark.parametrize(
    ("offset", "when", "newest", "named"),
    [
        ("x", None, None, "offset"),
        ("-1", None, None, "offset"),
        (None, None, "0", "newest"),
        (None, "yesterday", None, "time"),
        (None, "2026-13-01T00:00:00Z", None, "time"),
        ("1", None, "2", "offset"),
    ],
)
def test_a_malformed_start_names_its_field(
    offset: str | None, when: str | None, newest: str | None, named: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Start.parse(offset, when, newest)
    assert refused.value.setting == named


def test_a_read_ends_at_the_first_message_past_its_end_not_at_the_deadline() -> None:
    # offsets 0-2, a transaction marker at 3 (no message), then messages that came later
    now = [0.0]
    client = FakeClient([FakeRaw(o) for o in (0, 1, 2, 4, 5)], now)
    reader = TopicReader({"bootstrap.servers": "x"}, "test", clock=lambda: now[0])
    read = list(reader.read(client, [("orders", 0, 0, 4)]))  # type: ignore[arg-type]
    assert [raw.offset() for raw, _ in read if raw is not None] == [0, 1, 2]
    assert read[-1] == (None, True), "ended, not timed out"


def test_a_read_that_gets_nothing_ends_at_its_deadline() -> None:
    now = [0.0]
    reader = TopicReader({"bootstrap.servers": "x"}, "test", timeout=3, clock=lambda: now[0])
    read = list(reader.read(FakeClient([], now), [("orders", 0, 0, 4)]))  # type: ignore[arg-type]
    assert read == [(None, False)], "timed out"
    assert 3 <= now[0] < 3.6


def test_the_readers_settings_never_join_a_group_or_commit() -> None:
    settings = reader_settings(
        {
            "bootstrap.servers": "x",
            "group.id": "app",
            "group.protocol": "consumer",
            "enable.auto.commit": True,
            "transactional.id": "t",
            "client.id": "c",
        },
        "conveyor-reader",
    )
    assert settings == {
        "bootstrap.servers": "x",
        "client.id": "c",
        "group.id": "conveyor-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }
