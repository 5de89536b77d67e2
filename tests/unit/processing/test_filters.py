"""Filters over a batch, without a broker: throttle keeps at most N per interval and holds
the rest until the interval ends; delay holds the first message that is too young; expire
drops the old ones; filters chain (a later filter sees what the earlier kept, before its
hold); a filter of one's own may drop by any rule; verdicts that invent or reorder messages
are refused."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from conveyor import ConfigurationError, Delay, Expire, Message, Throttle, Verdict
from conveyor.messages import Deserializers
from conveyor.processing.filters import apply_filters
from unit.processing.fakes import FakeRaw

NOW = 1_800_000_000.0


def batch(*ages: float, start: int = 0) -> list[Any]:
    """Raw messages produced ``ages`` seconds before NOW, at offsets start, start + 1, ..."""
    return [FakeRaw(start + i, timestamp=int((NOW - age) * 1000)) for i, age in enumerate(ages)]


def offsets(raws: Sequence[Any]) -> list[int]:
    return [raw.offset() for raw in raws]


def run(filters: list[Any], raws: list[Any], now: float = NOW) -> Any:
    return apply_filters(filters, raws, Deserializers(), now)


def test_throttle_keeps_at_most_its_limit_per_interval_and_holds_the_rest() -> None:
    throttle = Throttle(3, per=2.0)
    first = run([throttle], batch(0, 0, 0, 0, 0))
    assert offsets(first.keep) == [0, 1, 2]
    assert offsets(first.held) == [3, 4]
    assert first.through == 3
    assert first.hold is not None
    assert first.hold[1:] == ("throttled", 2.0)
    early = run([throttle], batch(0, 0, start=3), now=NOW + 1.0)
    assert early.keep == []
    assert early.hold is not None
    assert early.hold[2] == pytest.approx(1.0), "until the interval ends"
    later = run([throttle], batch(0, 0, start=3), now=NOW + 2.0)
    assert offsets(later.keep) == [3, 4], "a new interval"
    other = run([throttle], [FakeRaw(0, partition=1)] * 1)
    assert len(other.keep) == 1, "each partition has its own interval"


def test_throttle_counts_a_put_back_tail_once() -> None:
    """Messages the throttle let through that come back within the interval (a later filter
    held them, consume() raised and they are retried) pass again without being counted a
    second time; new messages still count, up to the limit."""
    throttle = Throttle(5, per=60.0)

    class HoldFrom:
        """Holds from offset ``at`` once, then lets everything through."""

        def __init__(self, at: int) -> None:
            self.at: int | None = at

        def apply(self, messages: Sequence[Message], now: float) -> Verdict:
            cut = next((i for i, m in enumerate(messages) if m.offset == self.at), None)
            if cut is None:
                return Verdict(messages)
            self.at = None
            return Verdict(messages[:cut], hold=messages[cut], hold_for=1.0)

    later = HoldFrom(2)
    first = run([throttle, later], batch(0, 0, 0, 0))
    assert offsets(first.keep) == [0, 1]
    assert offsets(first.held) == [2, 3], "the tail the throttle let through waits"
    tail = run([throttle, later], batch(0, 0, 0, 0, start=2), now=NOW + 1.0)
    assert offsets(tail.keep) == [2, 3, 4], "2 and 3 counted once: one new message has room"
    assert offsets(tail.held) == [5]
    retried = run([throttle], batch(0, 0, 0, start=2), now=NOW + 2.0)
    assert offsets(retried.keep) == [2, 3, 4], "a retried batch is not counted again"
    assert offsets(run([throttle], batch(0, start=5), now=NOW + 3.0).keep) == []


def test_delay_holds_from_the_first_message_that_is_too_young() -> None:
    result = run([Delay(timedelta(seconds=5))], batch(9, 6, 4, 8))
    assert offsets(result.keep) == [0, 1]
    assert offsets(result.held) == [2, 3], "order is kept: the older one after it waits too"
    assert result.hold is not None
    assert result.hold[1:] == ("delayed", pytest.approx(1.0))
    assert result.through == 2


def test_expire_drops_the_old_ones_and_marks_past_them() -> None:
    result = run([Expire(timedelta(minutes=5))], batch(400, 10, 301, 0))
    assert offsets(result.keep) == [1, 3]
    [(_filter, reason, dropped)] = result.dropped
    assert (reason, offsets(dropped)) == ("expired", [0, 2])
    assert result.through == 4
    assert result.hold is None


def test_filters_chain_and_a_hold_stops_the_batch() -> None:
    result = run([Expire(60), Throttle(2, per=10)], batch(100, 1, 2, 3, 4))
    assert offsets(result.keep) == [1, 2]
    assert offsets(result.held) == [3, 4]
    assert [offsets(raws) for _, _, raws in result.dropped] == [[0]]
    assert result.through == 3


class EvenOnly:
    def apply(self, messages: Sequence[Message], now: float) -> Verdict:
        return Verdict([m for m in messages if m.offset % 2 == 0], reason="odd")


def test_a_filter_of_ones_own() -> None:
    result = run([EvenOnly()], batch(0, 0, 0, 0))
    assert offsets(result.keep) == [0, 2]
    assert [(reason, offsets(raws)) for _, reason, raws in result.dropped] == [("odd", [1, 3])]


class Inventing:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def apply(self, messages: Sequence[Message], now: float) -> Any:
        if self.mode == "new":
            return Verdict([Message(FakeRaw(99), Deserializers())])
        if self.mode == "reversed":
            return Verdict(list(reversed(messages)))
        if self.mode == "after-hold":
            return Verdict(messages, hold=messages[0], hold_for=1.0)
        return [messages]  # not a Verdict


@pytest.mark.parametrize("mode", ["new", "reversed", "after-hold", "list"])
def test_a_verdict_that_does_not_add_up_is_refused(mode: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        run([Inventing(mode)], batch(0, 0))
    assert refused.value.setting == "filters"


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: Throttle(0), "limit"),
        (lambda: Throttle(5, per=0), "per"),
        (lambda: Delay(-1), "delay_by"),
        (lambda: Expire(timedelta(0)), "expire_in"),
    ],
)
def test_bad_filter_settings_are_named(make: Any, named: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        make()
    assert refused.value.setting == named
