"""The offset tracker under adversarial completion orders: the committable offset is always
the first unfinished one, never past it."""

from __future__ import annotations

import random

import pytest

from conveyor.processing.virtual import OffsetTracker


def first_unfinished(handed: list[int], finished: set[int]) -> int | None:
    """The reference answer, computed the slow way."""
    for offset in handed:
        if offset not in finished:
            return offset
    return handed[-1] + 1 if handed else None


def test_nothing_handed_out_commits_nothing() -> None:
    tracker = OffsetTracker()
    assert tracker.committable() is None
    tracker.finish(3)  # unknown: ignored
    assert tracker.committable() is None


def test_finishing_out_of_order_waits_for_the_first() -> None:
    tracker = OffsetTracker()
    for offset in range(5):
        tracker.hand_out(offset)
    for offset in (4, 2, 3, 1):
        tracker.finish(offset)
        assert tracker.committable() == 0, f"offset 0 is unfinished after finishing {offset}"
    tracker.finish(0)
    assert tracker.committable() == 5
    assert len(tracker) == 0


@pytest.mark.parametrize("seed", range(40))
def test_random_permutations_with_gaps_and_duplicates(seed: int) -> None:
    """Offsets with gaps (compaction, transaction markers), finished in a random order, some
    twice, some unknown: after every step the tracker agrees with the reference."""
    rng = random.Random(seed)
    offsets = sorted(rng.sample(range(10_000), rng.randint(1, 300)))
    tracker = OffsetTracker()
    handed: list[int] = []
    finished: set[int] = set()
    order = offsets[:]
    rng.shuffle(order)
    # interleave: hand out in offset order, finish whatever was handed out, in random order
    cursor = 0
    while cursor < len(offsets) or len(finished) < len(offsets):
        if cursor < len(offsets) and (rng.random() < 0.5 or len(finished) == cursor):
            assert tracker.hand_out(offsets[cursor], f"m{offsets[cursor]}")
            handed.append(offsets[cursor])
            cursor += 1
            continue
        unfinished = [o for o in handed if o not in finished]
        choice = rng.choice(unfinished)
        tracker.finish(choice)
        finished.add(choice)
        if rng.random() < 0.2:
            tracker.finish(rng.choice(sorted(finished)))  # a duplicate completion
        if rng.random() < 0.1:
            tracker.finish(rng.randint(-5, 11_000) * 2 + 1_000_000)  # never handed out
        expected = first_unfinished(handed, finished)
        assert tracker.committable() == expected
        assert tracker.outstanding() == [
            f"m{o}" for o in handed if o not in finished and o >= expected
        ]
        for offset in handed:
            assert tracker.is_finished(offset) == (offset in finished)
    assert tracker.committable() == offsets[-1] + 1
    assert len(tracker) == 0


def test_offsets_must_grow() -> None:
    tracker = OffsetTracker()
    assert tracker.hand_out(5)
    assert not tracker.hand_out(5), "a duplicate is refused"
    assert not tracker.hand_out(3), "an older offset is refused"
    assert tracker.hand_out(9)
    assert tracker.last() == 9


def test_outstanding_can_include_what_finished_ahead() -> None:
    tracker = OffsetTracker()
    for offset in range(4):
        tracker.hand_out(offset, offset)
    tracker.finish(2)
    assert tracker.outstanding() == [0, 1, 3]
    assert tracker.outstanding(include_finished=True) == [0, 1, 2, 3]


def test_forget_starts_over() -> None:
    tracker = OffsetTracker()
    tracker.hand_out(10)
    tracker.forget()
    assert tracker.committable() is None
    assert tracker.hand_out(2), "after a seek back, older offsets are handed out again"
    assert tracker.committable() == 2
