"""A partition's backlog hands out batches in order, across the runs it was given, without
per-message work; retried messages go back in front."""

from __future__ import annotations

from conveyor.processing.backlog import Backlog


def filled(*runs: list[int]) -> Backlog:
    backlog = Backlog()
    for run in runs:
        backlog.extend(list(run))
    return backlog


def test_batches_come_in_order_across_runs() -> None:
    backlog = filled(list(range(5)), list(range(5, 8)), list(range(8, 20)))
    taken = []
    while backlog:
        taken.append(backlog.take(4))
    assert taken == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16, 17, 18, 19]]
    assert len(backlog) == 0
    assert backlog.take(4) == []


def test_a_whole_run_is_handed_over_without_a_copy() -> None:
    run = [1, 2, 3]
    backlog = Backlog()
    backlog.extend(run)
    assert backlog.take(10) is run


def test_put_back_goes_in_front_and_len_follows() -> None:
    backlog = filled(list(range(10)))
    batch = backlog.take(4)
    assert len(backlog) == 6
    backlog.put_back(batch[1:])
    assert len(backlog) == 9
    assert backlog.first() == 1
    assert list(backlog) == [1, 2, 3, *range(4, 10)]
    assert backlog.take(100) == [1, 2, 3, *range(4, 10)]


def test_clear_and_first() -> None:
    backlog = filled([1, 2], [3])
    backlog.take(1)
    assert backlog.first() == 2
    backlog.clear()
    assert backlog.first() is None
    assert not backlog
