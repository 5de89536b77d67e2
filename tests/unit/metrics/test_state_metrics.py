"""The state stores' restores as metrics: the records and bytes replayed, how long opening
took, and what a restore in progress has still to read."""

from __future__ import annotations

from conveyor import App
from conveyor.instrumentation import events as ev


def _sample(text: str, name: str) -> float:
    [line] = [line for line in text.splitlines() if line.startswith(name)]
    return float(line.rsplit(" ", 1)[1])


def test_restores_are_counted_and_one_in_progress_shows_what_is_left() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1"})
    app.metrics.enable()
    monitor = app.monitor
    labels = {"topic": "clicks", "partition": 1, "store": "default"}
    monitor.instrument(
        ev.STATE_RESTORING, **labels, records=500, bytes=5_000, offset=600, end=1_000
    )
    text = app.metrics.exposition().decode()
    remaining = (
        'conveyor_state_restore_remaining_records{partition="1",store="default",topic="clicks"}'
    )
    assert _sample(text, remaining) == 400
    monitor.instrument(
        ev.STATE_RESTORED, **labels, records=900, bytes=9_000, seconds=1.5, start=100, end=1_000
    )
    text = app.metrics.exposition().decode()
    assert _sample(text, remaining) == 0
    assert (
        _sample(text, 'conveyor_state_restored_records_total{store="default",topic="clicks"}')
        == 900
    )
    assert (
        _sample(text, 'conveyor_state_restored_bytes_total{store="default",topic="clicks"}')
        == 9_000
    )
    assert (
        _sample(
            text, 'conveyor_state_restore_duration_seconds_count{store="default",topic="clicks"}'
        )
        == 1
    )
