"""While apps run, the collector's first threshold is raised (never lowered) and put back
when the last one stops, unless someone else changed it meanwhile."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from conveyor.processing.collector import CollectorThreshold


@pytest.fixture(autouse=True)
def _keep_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_raised_while_running_and_restored_after_the_last() -> None:
    record = CollectorThreshold()
    first = record.raise_to(50_000)
    second = record.raise_to(20_000)
    assert gc.get_threshold() == (50_000, 10, 10)
    first()
    assert gc.get_threshold()[0] == 50_000, "another app still runs"
    second()
    second()  # a second call changes nothing
    assert gc.get_threshold() == (700, 10, 10)


def test_never_lowered() -> None:
    gc.set_threshold(100_000, 10, 10)
    record = CollectorThreshold()
    restore = record.raise_to(50_000)
    assert gc.get_threshold()[0] == 100_000
    restore()
    assert gc.get_threshold()[0] == 100_000


def test_a_change_made_meanwhile_is_kept() -> None:
    record = CollectorThreshold()
    restore = record.raise_to(50_000)
    gc.set_threshold(5_000, 10, 10)  # the user decided otherwise while the app ran
    restore()
    assert gc.get_threshold()[0] == 5_000


def test_none_leaves_the_collector_alone() -> None:
    record = CollectorThreshold()
    record.raise_to(None)()
    assert gc.get_threshold() == (700, 10, 10)
