"""Filters: see each batch before ``consume()`` and drop messages, or make the rest wait.

A route's ``filters=[...]`` run in order over the batch of one partition. Each returns a
:class:`Verdict`: the messages it hands on (``keep``, in order), and optionally the first
message that must wait (``hold``) with how long (``hold_for`` seconds). Messages before the
hold that are not kept are dropped: marked as consumed, counted (``filter.dropped``). A hold
stops the batch there: the messages kept before it are consumed, the partition pauses (it
fetches nothing; no loop spins) and, ``hold_for`` later, the held messages go through the
filters again (``filter.paused``).

Built in: :class:`Throttle` (at most N messages per interval), :class:`Delay` (a message is
consumed no sooner than ``delay_by`` after it was produced) and :class:`Expire` (messages
older than ``expire_in`` are dropped). A filter of your own is any object with
``apply(messages, now) -> Verdict`` (one instance per route: it sees every partition's
batches, from the workers' threads — keep state per ``message.partition``, under a lock).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from conveyor.errors import ConfigurationError
from conveyor.instrumentation import events as ev
from conveyor.messages import Deserializers, Message, age_of, records_of

__all__ = [
    "Delay",
    "Expire",
    "Filter",
    "Filtered",
    "Throttle",
    "Verdict",
    "apply_filters",
    "report_filtered",
]


@dataclass(frozen=True)
class Verdict:
    """What a filter decided about the messages it was given: ``keep`` (handed on, a
    subsequence in order); ``hold``, the first message that waits ``hold_for`` seconds
    (with every message after it); ``reason`` names the action in events (``dropped`` by
    default for messages not kept)."""

    keep: Sequence[Message]
    hold: Message | None = None
    hold_for: float = 0.0
    reason: str = ""


@runtime_checkable
class Filter(Protocol):
    """Anything with ``apply(messages, now) -> Verdict`` (``now``: epoch seconds)."""

    def apply(self, messages: Sequence[Message], now: float) -> Verdict: ...


def _seconds(name: str, value: Any) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise ConfigurationError(
            f"{name} must be a positive timedelta or seconds, got {value!r}", name
        )
    return float(seconds)


class Throttle:
    """At most ``limit`` messages per ``per`` seconds for each partition: the rest of a batch
    waits, its partition paused, until the interval ends.

    A message is counted once per interval: one that comes back within it (a tail a later
    filter held, a batch retried after ``consume()`` raised, a rewind) passes without
    counting again.

    Example: ``Throttle(1000, per=1.0)`` — 1,000 messages a second per partition."""

    def __init__(self, limit: int, per: float | timedelta = 1.0) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"limit must be a whole number >= 1, got {limit!r}", "limit")
        self.limit = limit
        self.per = _seconds("per", per)
        # per partition: the interval's start, how many it let through, and the offset ranges
        # of those (a list of (first, last), usually one)
        self._windows: dict[tuple[str, int], tuple[float, int, list[tuple[int, int]]]] = {}
        self._lock = threading.Lock()

    def apply(self, messages: Sequence[Message], now: float) -> Verdict:
        if not messages:
            return Verdict(messages)
        where = (messages[0].topic, messages[0].partition)
        with self._lock:
            start, used, counted = self._windows.get(where, (now, 0, []))
            if now >= start + self.per:
                start, used, counted = now, 0, []
            taken, added, fresh = _count_once(messages, counted, self.limit - used)
            self._windows[where] = (start, used + added, _merged(counted, fresh))
        if taken == len(messages):
            return Verdict(messages)
        return Verdict(
            messages[:taken],
            hold=messages[taken],
            hold_for=start + self.per - now,
            reason="throttled",
        )

    def __repr__(self) -> str:
        return f"Throttle({self.limit}, per={self.per:g})"


def _count_once(
    messages: Sequence[Message], counted: list[tuple[int, int]], room: int
) -> tuple[int, int, list[tuple[int, int]]]:
    """How many of ``messages`` (in offset order) pass with ``room`` left, those within the
    ``counted`` ranges passing free; how many of them count; and the ranges of those."""
    fresh: list[tuple[int, int]] = []
    passed = added = 0
    previous_fresh = False
    for message in messages:
        offset = message.offset
        if any(first <= offset <= last for first, last in counted):
            previous_fresh = False
        else:
            if added == room:
                break
            added += 1
            if previous_fresh:
                fresh[-1] = (fresh[-1][0], offset)
            else:
                fresh.append((offset, offset))
            previous_fresh = True
        passed += 1
    return passed, added, fresh


def _merged(counted: list[tuple[int, int]], fresh: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``counted`` with the ``fresh`` ranges added, overlapping and touching ones joined."""
    if not fresh:
        return counted
    ranges = sorted([*counted, *fresh])
    joined: list[tuple[int, int]] = []
    for first, last in ranges:
        if joined and first <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(joined[-1][1], last))
        else:
            joined.append((first, last))
    return joined


class Delay:
    """Consume a message no sooner than ``delay_by`` after it was produced (its timestamp):
    a batch stops at the first message that is too young, and its partition waits until that
    one is old enough. Messages without a timestamp pass."""

    def __init__(self, delay_by: float | timedelta) -> None:
        self.delay_by = _seconds("delay_by", delay_by)

    def apply(self, messages: Sequence[Message], now: float) -> Verdict:
        for index, message in enumerate(messages):
            age = age_of(message, now)
            if age is not None and age < self.delay_by:
                return Verdict(
                    messages[:index], hold=message, hold_for=self.delay_by - age, reason="delayed"
                )
        return Verdict(messages)

    def __repr__(self) -> str:
        return f"Delay({self.delay_by:g} s)"


class Expire:
    """Drop messages produced more than ``expire_in`` ago (their timestamp): they are marked
    as consumed and counted, never handed to ``consume()``."""

    def __init__(self, expire_in: float | timedelta) -> None:
        self.expire_in = _seconds("expire_in", expire_in)

    def apply(self, messages: Sequence[Message], now: float) -> Verdict:
        fresh = []
        for message in messages:
            age = age_of(message, now)
            if age is None or age <= self.expire_in:
                fresh.append(message)
        return Verdict(fresh, reason="expired")

    def __repr__(self) -> str:
        return f"Expire({self.expire_in:g} s)"


@dataclass
class Filtered:
    """A batch after its route's filters: ``keep`` (librdkafka's messages to consume),
    ``dropped`` per filter (``(filter, reason, raws)``), ``held`` (the raws that wait, with
    the filter, reason and seconds in ``hold``) and ``through`` (the offset to mark once the
    kept ones are consumed: everything before it was consumed or dropped)."""

    keep: list[Any]
    through: int
    dropped: list[tuple[Any, str, list[Any]]] = field(default_factory=list)
    held: list[Any] = field(default_factory=list)
    hold: tuple[Any, str, float] | None = None


def report_filtered(filtered: Filtered, monitor: Any, topic: str, partition: int) -> None:
    """The monitor's ``filter.dropped`` (per filter that dropped messages) and
    ``filter.paused`` (a hold) events for ``filtered``, when subscribed."""
    if filtered.dropped and ev.FILTER_DROPPED in monitor.subscribed:
        for chosen, reason, raws in filtered.dropped:
            monitor.instrument(
                ev.FILTER_DROPPED,
                filter=chosen,
                reason=reason,
                topic=topic,
                partition=partition,
                count=len(raws),
                first_offset=raws[0].offset(),
                last_offset=raws[-1].offset(),
            )
    if filtered.held and filtered.hold is not None and ev.FILTER_PAUSED in monitor.subscribed:
        chosen, reason, seconds = filtered.hold
        monitor.instrument(
            ev.FILTER_PAUSED,
            filter=chosen,
            reason=reason,
            topic=topic,
            partition=partition,
            offset=filtered.held[0].offset(),
            count=len(filtered.held),
            seconds=seconds,
        )


def apply_filters(
    filters: Sequence[Any], batch: list[Any], deserializers: Deserializers, now: float
) -> Filtered:
    """Run ``filters`` over ``batch`` (librdkafka's messages of one partition, in order).

    Raises:
        ConfigurationError: a filter returned messages it was not given, or out of order.
    """
    messages = [Message(raw, deserializers) for raw in batch]
    held: list[Message] = []
    result = Filtered(keep=[], through=batch[-1].offset() + 1)
    for current in filters:
        verdict = current.apply(messages, now)
        if not isinstance(verdict, Verdict):
            raise ConfigurationError(
                f"the filter {current!r} returned {verdict!r}, not a Verdict", "filters"
            )
        positions = {id(message): index for index, message in enumerate(messages)}
        cut = len(messages)
        if verdict.hold is not None:
            if id(verdict.hold) not in positions:
                raise ConfigurationError(
                    f"the filter {current!r} held a message it was not given", "filters"
                )
            cut = positions[id(verdict.hold)]
        kept = list(verdict.keep)
        indexes = [positions.get(id(message), -1) for message in kept]
        if any(index < 0 or index >= cut for index in indexes) or indexes != sorted(set(indexes)):
            raise ConfigurationError(
                f"the filter {current!r} kept messages it was not given, held or out of order",
                "filters",
            )
        chosen = set(indexes)
        dropped = records_of([messages[i] for i in range(cut) if i not in chosen])
        if dropped:
            result.dropped.append((current, verdict.reason or "dropped", dropped))
        if verdict.hold is not None:
            held = messages[cut:] + held
            result.hold = (current, verdict.reason or "held", max(0.0, float(verdict.hold_for)))
            result.through = verdict.hold.offset
        messages = kept
    result.keep = records_of(messages)
    result.held = records_of(held)
    return result
