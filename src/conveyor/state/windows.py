"""Windows: aggregations over time, per key, kept in the partition's store.

Declare a window on a consumer class and feed it the batch; it returns what closed (and, with
``emit="update"``, every window a message changed)::

    class PerMinute(Consumer):
        window = Tumbling(timedelta(minutes=1), grace=timedelta(seconds=10)).agg(
            count=Count(), amount=Sum("amount"))

        def consume(self):
            for closed in self.window.update(self.messages):
                self.produce_async(topic="orders.1m", key=closed.key, payload=closed.value)

or with no consumer code, as a route option: ``app.routes.topic("orders",
window=Tumbling(60).count().to("orders.1m", late_to="orders.late"))``.

Time is the messages' timestamps (milliseconds). A window closes when the partition's *stream
time*, the latest timestamp its messages carried, passes the window's end plus its grace (not
per key: a key that falls silent still has its window closed by the others). A message whose
windows closed already is late: it is left out, listed in ``late`` and, on a route, sent to
``late_to``. ``tick()`` closes windows by the wall clock, for a partition that falls silent.

Kinds: :class:`Tumbling` (fixed, back to back), :class:`Hopping` (fixed, overlapping by
``step``), :class:`Sliding` (per key, one ending at each message and one starting after each,
as Kafka Streams' sliding windows), :class:`Session` (per key, grows while messages come within
``gap`` of each other).
"""

from __future__ import annotations

import copy
import heapq
import operator
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Literal, Protocol

from conveyor.errors import ConfigurationError
from conveyor.messages import Message, Messages, record_of, records_of
from conveyor.state.aggregations import Aggregation, Count
from conveyor.state.clock import record_time, wall_clock
from conveyor.state.open_windows import OpenWindows, Span
from conveyor.state.per_partition import PerPartition
from conveyor.state.store import Store

if TYPE_CHECKING:
    from conveyor.state.view import State


class _WithStores(Protocol):
    """A consumer, as its windows see it: its partition's stores."""

    @property
    def stores(self) -> Mapping[str, State]: ...


__all__ = ["Hopping", "Session", "Sliding", "Tumbling", "Window", "WindowResult", "Windowed"]

_STREAM_TIME = "stream-time"
"""The store's key of the partition's stream time (window entries are tuples)."""
_RECORDS = "records"
"""A sliding window's entry of one key's recent messages: ``(_RECORDS, key)``."""


def _milliseconds(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be seconds or a timedelta, got {value!r}", name)
    milliseconds = round(value * 1000)
    if milliseconds < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum} ms, got {value!r} s", name)
    return milliseconds


@dataclass(slots=True)
class WindowResult:
    """One window's aggregations: ``key``, ``start`` and ``end`` (epoch milliseconds, the end
    excluded), ``value`` (``{"start", "end", <each aggregation's name>: ...}``) and ``final``
    (closed: it will not change again)."""

    key: Any
    start: int
    end: int
    value: dict[str, Any]
    final: bool


class Window:
    """What windows a message falls in, and when each closes (see the module)."""

    grace: int

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        raise NotImplementedError

    def agg(self, **aggregations: Aggregation) -> Windowed:
        """The window computing ``aggregations`` (each under its name in the result)."""
        return Windowed(self, aggregations)

    def count(self) -> Windowed:
        """The window counting its messages (``value["count"]``)."""
        return Windowed(self, {"count": Count()})


class Tumbling(Window):
    """Fixed windows of ``size``, back to back, aligned to the epoch: each message in one."""

    def __init__(self, size: float | timedelta, *, grace: float | timedelta = 0) -> None:
        self.size = _milliseconds("size", size)
        self.grace = _milliseconds("grace", grace, minimum=0)

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        start = timestamp - timestamp % self.size
        return [(start, start + self.size)]


class Hopping(Window):
    """Windows of ``size`` starting every ``step`` (aligned to the epoch): each message is in
    ``size / step`` of them."""

    def __init__(
        self, size: float | timedelta, step: float | timedelta, *, grace: float | timedelta = 0
    ) -> None:
        self.size = _milliseconds("size", size)
        self.step = _milliseconds("step", step)
        self.grace = _milliseconds("grace", grace, minimum=0)
        if self.step > self.size:
            raise ConfigurationError("Hopping: step must not be longer than size", "step")

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        start = timestamp - timestamp % self.step
        found = []
        while start > timestamp - self.size:
            found.append((start, start + self.size))
            start -= self.step
        found.reverse()
        return found


class Sliding(Window):
    """Windows of ``size`` that slide with the messages, per key (Kafka Streams' sliding
    windows): one ends at each message's timestamp (the messages of the ``size`` before it,
    both ends included), and one starts just after each message that a later message of the
    key came within ``size`` of (what is left when that message drops out). So every distinct
    set of messages no more than ``size`` apart is one window; ``end`` in its result is the
    last included millisecond plus one."""

    def __init__(self, size: float | timedelta, *, grace: float | timedelta = 0) -> None:
        self.size = _milliseconds("size", size)
        self.grace = _milliseconds("grace", grace, minimum=0)

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        return [(timestamp - self.size, timestamp + 1)]


class Session(Window):
    """One window per key that grows while its messages come within ``gap`` of each other;
    two sessions a message bridges become one. It closes ``gap`` (plus grace) after its last
    message."""

    def __init__(self, gap: float | timedelta, *, grace: float | timedelta = 0) -> None:
        self.gap = _milliseconds("gap", gap)
        self.grace = _milliseconds("grace", grace, minimum=0)

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        return [(timestamp, timestamp)]


class Windowed(PerPartition):
    """A window and its aggregations: a class attribute of a consumer (``self.window``), or a
    route's ``window=`` option once :meth:`to` says where results go."""

    def __init__(
        self,
        window: Window,
        aggregations: Mapping[str, Aggregation],
        emit: Literal["final", "update"] = "final",
    ) -> None:
        if not aggregations:
            raise ConfigurationError("a window needs at least one aggregation", "aggregations")
        for name, aggregation in aggregations.items():
            if name in ("start", "end") or not isinstance(aggregation, Aggregation):
                raise ConfigurationError(
                    f"aggregation {name!r} must be a Count(), Sum(...) ... and not be named "
                    "start or end",
                    "aggregations",
                )
        if emit not in ("final", "update"):
            raise ConfigurationError(f"emit must be 'final' or 'update', got {emit!r}", "emit")
        self.window = window
        self.aggregations = dict(aggregations)
        self.emit = emit
        self.name = "window"
        self.output: str | None = None
        self.late_to: str | None = None
        self.exactly_once = False

    def updates(self) -> Windowed:
        """The same window, emitting each window a message changed, not only closed ones."""
        changed = copy.copy(self)
        changed.emit = "update"
        return changed

    def to(self, topic: str, *, late_to: str | None = None, exactly_once: bool = False) -> Windowed:
        """For a route's ``window=``: results go to ``topic`` (key: the message key; payload:
        the result's value), late messages to ``late_to`` (default: dropped, counted), in
        one transaction with the window's store and the offset when ``exactly_once``."""
        for name, value in (("topic", topic), ("late_to", late_to)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigurationError(f"window.to(): {name} must be a topic name", name)
        changed = copy.copy(self)
        changed.output, changed.late_to, changed.exactly_once = topic, late_to, bool(exactly_once)
        return changed

    def store(self) -> Store:
        """The store the window keeps its open windows in."""
        return Store(keys="json", values="json")

    def bind(self, consumer: _WithStores) -> PartitionWindow:
        return PartitionWindow(self, consumer)


class PartitionWindow:
    """A window as one partition's consumer sees it (``self.window``): :meth:`update` with each
    batch, :meth:`tick` when idle."""

    def __init__(self, declared: Windowed, consumer: _WithStores) -> None:
        self.declared = declared
        self._consumer = consumer
        self._window = declared.window
        self._aggregations = list(declared.aggregations.items())
        self._index: list[int] | None = None  # a heap of the times windows close at
        self._generation = -1  # the store's generation the index was loaded at
        # what closes when: fixed windows' spans (start, end), others' (start, end, key)
        self._closing: dict[int, set[tuple[Any, ...]]] = {}
        # fixed windows: their accumulators, written to the store at its flush
        self._fixed = None if isinstance(declared.window, Session | Sliding) else OpenWindows()
        self._layered: State | None = None  # the store partition _fixed is a layer of
        # sessions: their accumulators as the store holds them, read here, not from the store
        self._open: dict[tuple[int, int, Any], list[Any]] = {}
        self._updates = declared.emit == "update"
        self._sessions: dict[Any, list[tuple[int, int]]] = {}
        self.late: list[Message] = []
        """The messages of the last :meth:`update` whose windows had closed already."""

    @property
    def _state(self) -> State:
        return self._consumer.stores[self.declared.name]

    @property
    def stream_time(self) -> int:
        """The latest timestamp the partition's messages carried (-1: none yet), milliseconds."""
        return int(self._state.get(_STREAM_TIME, -1))

    def update(self, messages: Iterable[Message]) -> list[WindowResult]:
        """Fold ``messages`` into their windows; the windows that closed (and with
        ``emit="update"`` those they changed), in the order they closed or changed."""
        state = self._state
        self._load(state)
        stream = int(state.get(_STREAM_TIME, -1))
        results: list[WindowResult] = []
        self.late = []
        window = self._window
        if isinstance(window, Session | Sliding):
            add = self._add_to_session if isinstance(window, Session) else self._slide
            for message in messages:
                timestamp = _timestamp(message)
                stream = max(stream, timestamp)
                changed = add(state, message, timestamp, stream)
                if changed is None:
                    self.late.append(message)
                elif changed:
                    results.extend(changed)
        else:
            stream = self._add_fixed(state, messages, stream, results)
        state[_STREAM_TIME] = stream
        state.late += len(self.late)
        results.extend(self._close(state, stream))
        return results

    def tick(self, now: float | None = None) -> list[WindowResult]:
        """Close what the wall clock (``now``, epoch seconds) says has closed: for a
        partition whose messages stopped coming. Treats the wall clock as stream time."""
        state = self._state
        self._load(state)
        stream = max(int(state.get(_STREAM_TIME, -1)), round((now or wall_clock()) * 1000))
        state[_STREAM_TIME] = stream
        return self._close(state, stream)

    # -- fixed windows ----------------------------------------------------------------------
    # The hot path of windows: one loop over the batch, no call per message but the
    # aggregations' own (a tumbling window's span computed here, not by ``windows_for``).

    def _add_fixed(
        self, state: State, messages: Iterable[Message], stream: int, changed: list[WindowResult]
    ) -> int:
        """Fold ``messages`` into their tumbling or hopping windows (``changed``: each window
        a message changed, for ``emit="update"``); the stream time after them.

        A batch's first message in a window and key adds to new accumulators or to a copy of
        the open window's: :class:`OpenWindows` keeps the ones it replaced, so a batch that
        fails leaves the windows as they were."""
        window = self._window
        grace = window.grace
        size = window.size if type(window) is Tumbling else 0
        aggregations = [aggregation for _, aggregation in self._aggregations]
        counting = len(aggregations) == 1 and type(aggregations[0]) is Count
        if counting and size and not self._updates and type(messages) is Messages:
            counted = self._count_tumbling(state, messages, stream)
            if counted is not None:
                return counted
        folds = [
            (i, aggregation.add, None if type(aggregation) is Count else aggregation.read)
            for i, aggregation in enumerate(aggregations)
        ]
        fixed = self._fixed
        assert fixed is not None
        written: dict[Span, dict[Any, list[Any]]] = {}  # by this batch, per window and key
        late, updates = self.late, self._updates
        for message in messages:
            timestamp = _timestamp(message)
            stream = max(stream, timestamp)
            if size:
                start = timestamp - timestamp % size
                spans: Iterable[tuple[int, int]] = ((start, start + size),)
            else:
                spans = window.windows_for(timestamp)
            added = False
            for span in spans:
                if span[1] + grace <= stream:
                    continue  # closed already
                rows = written.get(span)
                if rows is None:
                    rows = written[span] = {}
                key = message.key
                accumulators = rows.get(key)
                if accumulators is None:
                    held = fixed.spans.get(span)
                    was = None if held is None else held.get(key)
                    if was is None:
                        _check_key(state, span, key)
                        accumulators = [aggregation.start() for aggregation in aggregations]
                    elif counting:
                        accumulators = [was[0]]
                    else:
                        accumulators = [a.copy(was[i]) for i, a in enumerate(aggregations)]
                    rows[key] = accumulators
                if counting:
                    accumulators[0] += 1
                else:
                    for i, add, read in folds:
                        value = None if read is None else read(message)
                        accumulators[i] = add(accumulators[i], value, timestamp)
                added = True
                if updates:
                    changed.append(self._result((*span, key), accumulators, final=False))
            if not added:
                late.append(message)
        for span, rows in written.items():
            if fixed.open(span)[1]:
                self._track(span[1] + grace, span)
            fixed.write(span, rows)
        return stream

    def _count_tumbling(self, state: State, messages: Messages, stream: int) -> int | None:
        """The hot path of a tumbling window's count: the batch counted per window and key
        column-wise (no :class:`Message` made, a dict entry per window and key, not per
        message). ``None`` (nothing done) for a batch with a late message or one without a
        timestamp: the message-by-message path handles those."""
        window = self._window
        assert isinstance(window, Tumbling)
        size = window.size
        if not messages:
            return None
        # (comprehensions: faster than maps here; a batch's starts made only when it spans
        # several windows, rare: the timestamps past 2**30 make each one slow)
        times = [record.timestamp()[1] for record in records_of(messages)]
        if -1 in times:
            return None  # a message without a timestamp (Kafka refuses other negative ones)
        earliest, last = min(times), max(times)
        first = earliest - earliest % size
        closing = size + window.grace
        latest: int = max(stream, last)
        if first + closing <= latest:  # some window may have closed before its message
            ends = [moment - moment % size + closing for moment in times]
            if any(map(operator.le, ends, accumulate(times, max, initial=stream))):
                return None  # one did (a message's own time never closes its window)
        fixed = self._fixed
        assert fixed is not None
        keys = messages.keys
        if first == last - last % size:
            groups = {first: Counter(keys)}
        else:
            groups = {}
            starts = [moment - moment % size for moment in times]
            for start, key in zip(starts, keys, strict=True):
                group = groups.get(start)
                if group is None:
                    group = groups[start] = Counter()
                group[key] += 1
        held_before = []
        for start, counted in groups.items():
            held = fixed.spans.get((start, start + size))
            was = [None] * len(counted) if held is None else list(map(held.get, counted))
            for key, old in zip(counted, was, strict=True):
                if old is None:
                    _check_key(state, (start, start + size), key)
            held_before.append(was)
        for (start, counted), was in zip(groups.items(), held_before, strict=True):
            span = (start, start + size)
            rows = {
                key: [count] if old is None else [old[0] + count]
                for (key, count), old in zip(counted.items(), was, strict=True)
            }
            if fixed.open(span)[1]:
                self._track(start + closing, span)
            fixed.write(span, rows, was)
        return latest

    # -- sliding windows -------------------------------------------------------------------
    # A key's messages no older than its oldest open window are kept (``(_RECORDS, key)``:
    # ``[timestamp, [each aggregation's read value]]`` in time order); a window's aggregations
    # are folded from them when it is emitted.

    def _slide(
        self, state: State, message: Message, timestamp: int, stream: int
    ) -> list[WindowResult] | None:
        window = self._window
        assert isinstance(window, Sliding)
        size, grace = window.size, window.grace
        if timestamp + size + 1 + grace <= stream:
            return None  # every window it could be in closed already
        key = message.key
        records = list(state.get((_RECORDS, key), ()))
        values = [aggregation.read(message) for _, aggregation in self._aggregations]
        at = len(records)
        while at and records[at - 1][0] > timestamp:
            at -= 1
        records.insert(at, [timestamp, values])
        state[(_RECORDS, key)] = records
        opened = self._sliding_windows(records, key, stream, around=timestamp)
        for entry in opened:
            self._track(entry[1] + grace, entry)
        if self.declared.emit != "update":
            return []
        return [
            self._result(entry, self._fold(records, entry), final=False)
            for entry in sorted(opened, key=_order)
            if entry[0] <= timestamp < entry[1]
        ]

    def _sliding_windows(
        self, records: list[Any], key: Any, stream: int, around: int | None = None
    ) -> set[tuple[int, int, Any]]:
        """The key's open windows (``around``: only those that may contain that time)."""
        window = self._window
        assert isinstance(window, Sliding)
        size, grace = window.size, window.grace
        found = set()
        times = [record[0] for record in records]
        for i, moment in enumerate(times):
            if around is not None and not moment - size <= around <= moment + size + 1:
                continue
            left = (moment - size, moment + 1, key)  # ends at the message
            if left[1] + grace > stream:
                found.add(left)
            later = i + 1
            while later < len(times) and times[later] == moment:
                later += 1
            if later < len(times) and times[later] <= moment + size + 1:
                right = (moment + 1, moment + size + 2, key)  # what is left as it drops out
                if right[1] + grace > stream:
                    found.add(right)
        return found

    def _fold(self, records: list[Any], entry: tuple[int, int, Any]) -> list[Any]:
        start, end, _ = entry
        accumulators = [aggregation.start() for _, aggregation in self._aggregations]
        for timestamp, values in records:
            if start <= timestamp < end:
                for i, (_, aggregation) in enumerate(self._aggregations):
                    accumulators[i] = aggregation.add(accumulators[i], values[i], timestamp)
        return accumulators

    def _forget_old(self, state: State, keys: set[Any], stream: int) -> None:
        """After sliding windows closed: each key's messages no open window holds any more
        are dropped (the key's entry with the last of them)."""
        window = self._window
        assert isinstance(window, Sliding)
        horizon = window.size + 2 + window.grace  # until the window after it closed too
        for key in keys:
            records = state.get((_RECORDS, key), ())
            kept = [record for record in records if record[0] + horizon > stream]
            if not kept:
                del state[(_RECORDS, key)]
            elif len(kept) != len(records):
                state[(_RECORDS, key)] = kept

    # -- sessions ----------------------------------------------------------------------------

    def _add_to_session(
        self, state: State, message: Message, timestamp: int, stream: int
    ) -> list[WindowResult] | None:
        window = self._window
        assert isinstance(window, Session)
        gap, grace = window.gap, window.grace
        key = message.key
        sessions = self._sessions.get(key, [])
        touching = [(s, e) for s, e in sessions if s - gap <= timestamp <= e + gap]
        start = min([timestamp, *(s for s, _ in touching)])
        end = max([timestamp, *(e for _, e in touching)])
        if end + gap + grace <= stream:
            return None  # its session closed already
        accumulators = [aggregation.start() for _, aggregation in self._aggregations]
        for s, e in touching:
            merged = self._open.pop((s, e, key), None)
            state.remove((s, e, key))
            self._untrack(e + gap + grace, (s, e, key))
            if merged is not None:
                accumulators = [
                    aggregation.merge(accumulators[i], merged[i])
                    for i, (_, aggregation) in enumerate(self._aggregations)
                ]
        for i, (_, aggregation) in enumerate(self._aggregations):
            accumulators[i] = aggregation.add(accumulators[i], aggregation.read(message), timestamp)
        entry = (start, end, key)
        if (start, end) in touching:
            state[entry] = accumulators
        else:  # a new extent: removed again before the flush (it grew), it leaves no tombstone
            state.create({entry: accumulators})
        self._open[entry] = accumulators
        self._sessions[key] = [(s, e) for s, e in sessions if (s, e) not in touching] + [
            (start, end)
        ]
        self._track(end + gap + grace, entry)
        return [self._result(entry, accumulators, final=False)] if self._updates else []

    # -- closing -----------------------------------------------------------------------------

    def _close(self, state: State, stream: int) -> list[WindowResult]:
        closed: list[WindowResult] = []
        index = self._index
        assert index is not None
        fixed = self._fixed
        if fixed is not None:
            while index and index[0] <= stream:
                for span in sorted(self._closing.pop(heapq.heappop(index), ())):
                    held = fixed.close(span)
                    if held is None:
                        continue
                    start, end = span
                    for key in sorted(held, key=repr):
                        closed.append(self._result((start, end, key), held[key], final=True))
            return closed
        sliding = isinstance(self._window, Sliding)
        slid: set[Any] = set()  # keys whose sliding windows closed
        while index and index[0] <= stream:
            at = heapq.heappop(index)
            for entry in sorted(self._closing.pop(at, ()), key=_order):
                if sliding:
                    records = state.get((_RECORDS, entry[2]), ())
                    closed.append(self._result(entry, self._fold(records, entry), final=True))
                    slid.add(entry[2])
                    continue
                accumulators = self._open.pop(entry, None)
                if accumulators is None:
                    continue
                state.remove(entry)
                closed.append(self._result(entry, accumulators, final=True))
                start, end, key = entry
                if key in self._sessions:
                    left = [(s, e) for s, e in self._sessions[key] if (s, e) != (start, end)]
                    if left:
                        self._sessions[key] = left
                    else:
                        del self._sessions[key]
        if slid:
            self._forget_old(state, slid, stream)
        return closed

    def _track(self, closes_at: int, entry: tuple[Any, ...]) -> None:
        assert self._index is not None
        entries = self._closing.get(closes_at)
        if entries is None:
            entries = self._closing[closes_at] = set()
            heapq.heappush(self._index, closes_at)
        entries.add(entry)

    def _untrack(self, closes_at: int, entry: tuple[int, int, Any]) -> None:
        entries = self._closing.get(closes_at)
        if entries is not None:
            entries.discard(entry)  # its time stays in the heap: popped with nothing to close

    def _load(self, state: State) -> None:
        """The open windows as the store holds them (once per assignment): their closing
        times, and each key's sessions: once per assignment, and again after writes were
        dropped (a failed batch may have closed windows its retry must close again)."""
        fixed = self._fixed
        if fixed is not None:
            self._load_fixed(state, fixed)
            return
        if self._index is not None and self._generation == state.generation:
            return
        self._index, self._closing, self._sessions, self._open = [], {}, {}, {}
        self._generation = state.generation
        window = self._window
        extra = window.gap if isinstance(window, Session) else 0
        stream = int(state.get(_STREAM_TIME, -1))
        for entry in state:
            if not isinstance(entry, tuple):
                continue  # the stream time
            if isinstance(window, Sliding):
                _, key = entry
                for opened in self._sliding_windows(state[entry], key, stream):
                    self._track(opened[1] + window.grace, opened)
                continue
            start, end, key = entry
            self._open[entry] = state[entry]
            self._track(end + extra + window.grace, (start, end, key))
            if isinstance(window, Session):
                self._sessions.setdefault(key, []).append((start, end))

    def _load_fixed(self, state: State, fixed: OpenWindows) -> None:
        """Fixed windows: :class:`OpenWindows` is a layer of the store partition (registered
        once per store partition), read from it again after a flush failed."""
        if state is not self._layered:
            state.add_layer(fixed)
            self._layered = state
            fixed.stale = True
        if fixed.stale:
            rows = [((s, e), key, state[s, e, key]) for s, e, key in _entries(state)]
            fixed.load(rows)
        elif not fixed.reopened and self._index is not None:
            return
        fixed.reopened = False
        self._index, self._closing = [], {}
        for span in fixed.spans:
            self._track(span[1] + self._window.grace, span)

    def _result(
        self, entry: tuple[int, int, Any], accumulators: list[Any], final: bool
    ) -> WindowResult:
        start, end, key = entry
        if isinstance(self._window, Session):
            end = end + 1  # the last message's timestamp included: the end is excluded
        value: dict[str, Any] = {"start": start, "end": end}
        for i, (name, aggregation) in enumerate(self._aggregations):
            value[name] = aggregation.result(accumulators[i])
        return WindowResult(key, start, end, value, final)


def _check_key(state: State, span: Span, key: Any) -> None:
    """Raise if the store cannot keep the window's entry for ``key`` (before anything is
    written); a ``str`` key always fits its JSON keys, and is not encoded to find out."""
    if type(key) is not str:
        state.check_key((*span, key))


def _entries(state: State) -> list[tuple[int, int, Any]]:
    """The fixed windows' entries the store holds (not the stream time)."""
    return [entry for entry in state if isinstance(entry, tuple)]


def _order(entry: tuple[int, int, Any]) -> tuple[int, str]:
    return entry[0], repr(entry[2])


def _timestamp(message: Message) -> int:
    """The message's timestamp in milliseconds (the wall clock when it has none)."""
    return record_time(record_of(message))
