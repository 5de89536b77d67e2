"""Reading an OpenTelemetry SDK sampler's decision before any span exists.

Tracing a message whose trace is not sampled should cost a header copy, not a span: the
SDK's own sampler classes decide by something Conveyor can read directly (the parent's
sampled flag under ``ParentBased``'s defaults, a root's trace id under the ratio sampler),
so the tracer decides first and asks the SDK to build only the spans that are kept. Any other
sampler is asked by the SDK, as usual. Nothing here is needed without the SDK.
"""

from __future__ import annotations

import os
import random
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from conveyor.tracing.headers import format_traceparent

__all__ = [
    "KEPT",
    "TRACE_ID_LIMIT",
    "HandedIds",
    "RootDecider",
    "RootDraws",
    "RootsOneByOne",
    "draws_in_bulk",
    "drops_unsampled_children",
    "root_bound",
    "root_decider",
]


def drops_unsampled_children(sampler: Any) -> bool:
    """Whether ``sampler`` is the SDK's ParentBased with its default for unsampled parents
    (drop), so that a child of an unsampled parent needs no sampler call."""
    try:
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF  # noqa: PLC0415
    except ImportError:  # the API alone: no SDK sampler to ask
        return False
    return (
        _parent_based(sampler)
        and getattr(sampler, "_remote_parent_not_sampled", None) is ALWAYS_OFF
        and getattr(sampler, "_local_parent_not_sampled", None) is ALWAYS_OFF
    )


def _parent_based(sampler: Any) -> bool:
    """Whether ``sampler`` is the SDK's ParentBased itself, or one of the classes the SDK builds
    from ``OTEL_TRACES_SAMPLER`` (``parentbased_traceidratio`` and the like), which only give
    it a root: a class of the user's own may decide otherwise, so it is asked."""
    from opentelemetry.sdk.trace import sampling  # noqa: PLC0415

    known = {
        getattr(sampling, name, None)
        for name in (
            "ParentBased",
            "ParentBasedTraceIdRatio",
            "_ParentBasedAlwaysOff",
            "_ParentBasedAlwaysOn",
        )
    }
    return type(sampler) in known - {None}


TRACE_ID_LIMIT = (1 << 64) - 1
KEPT = object()  # quick_decision: a root the sampler keeps, its trace id handed to the SDK


def root_bound(sampler: Any) -> int | None:
    """The bound a root's trace id (its lower 64 bits) must stay under to be sampled, when the
    root sampler is one whose decision that is (the SDK's ratio sampler, always on, always
    off, alone or as ParentBased's root); None for any other sampler (it is asked)."""
    try:
        from opentelemetry.sdk.trace import sampling  # noqa: PLC0415
    except ImportError:
        return None
    root = getattr(sampler, "_root", None) if _parent_based(sampler) else sampler
    if type(root) is sampling.TraceIdRatioBased:
        return int(root.bound)
    if root is sampling.ALWAYS_OFF:
        return 0
    if root is sampling.ALWAYS_ON:
        return TRACE_ID_LIMIT + 1
    return None


class HandedIds:
    """The id generator of Conveyor's tracer, able to hand the SDK a trace id drawn beforehand:
    :meth:`Tracing.quick_decision` decides on a root's trace id before any span exists,
    and when the sampler keeps it the span must get that same id (a ratio sampler decides by
    the id). The hand-over is per thread and used by the very next root span of that thread."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._handed = threading.local()
        self.draw: Callable[[], int] = inner.generate_trace_id
        self.generate_span_id: Callable[[], int] = inner.generate_span_id

    def hand_over(self, trace_id: int) -> None:
        self._handed.trace_id = trace_id

    def generate_trace_id(self) -> int:
        handed = getattr(self._handed, "trace_id", None)
        if handed is not None:
            self._handed.trace_id = None
            return int(handed)
        return int(self._inner.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        check = getattr(self._inner, "is_trace_id_random", None)
        return bool(check()) if check is not None else False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def draws_in_bulk(ids: HandedIds) -> bool:
    """Whether ``ids`` hands out the SDK's own random ids (``RandomIdGenerator``: 128 and 64
    bits of the ``random`` module, never zero), which :class:`RootDraws` can draw ahead, in
    bulk. Any other generator (one that puts a time in its ids, say) is called per root."""
    try:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator  # noqa: PLC0415
    except ImportError:
        return False
    return type(ids._inner) is RandomIdGenerator


_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_DRAWS: weakref.WeakSet[RootDraws] = weakref.WeakSet()


def _forget_draws() -> None:
    # A forked child must not send the roots its parent drew (the random module reseeds itself
    # in the child; what was drawn before the fork would go out twice).
    for draws in list(_DRAWS):
        draws.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_draws)


class RootDecider(Protocol):
    """Decides a root before any span exists, as the root sampler would (see
    :func:`root_decider`)."""

    def dropped(self) -> str | None:
        """The ``traceparent`` of the next root when the sampler drops it; None when it keeps
        it: its trace id is then handed to the SDK, for the next root span this thread begins
        (so that the SDK's sampler decides on the same id, and keeps it too)."""
        ...


def root_decider(sampler: Any, ids: HandedIds | None, flags: int) -> RootDecider | None:
    """How roots are decided without asking ``sampler``: drawn ahead in bulk from the SDK's own
    random ids, one by one from any other id generator, or None when the sampler's decision
    cannot be read (it is asked) or there is no SDK id generator to hand ids to. ``flags``
    are a dropped root's trace flags."""
    bound = root_bound(sampler)
    if bound is None or ids is None:
        return None
    if draws_in_bulk(ids):
        return RootDraws(ids, bound, flags)
    return RootsOneByOne(ids, bound, flags)


class RootsOneByOne:
    """Roots decided one at a time, calling the id generator for each (one of the user's own
    may put a time in its ids): a root is kept when the lower 64 bits of its trace id are
    under the sampler's ``bound``, as the SDK's ratio sampler decides."""

    def __init__(self, ids: HandedIds, bound: int, flags: int) -> None:
        self._ids = ids
        self._bound = bound
        self._flags = flags

    def dropped(self) -> str | None:
        ids = self._ids
        trace_id = ids.draw()
        if trace_id & TRACE_ID_LIMIT < self._bound:
            ids.hand_over(trace_id)
            return None
        return format_traceparent(trace_id, ids.generate_span_id(), self._flags)


class RootDraws:
    """Roots decided ahead, :attr:`SIZE` at a time, as :class:`RootsOneByOne` would decide them
    over the SDK's ``RandomIdGenerator``: one ``getrandbits`` call and one hex formatting for
    the lot instead of two calls and a format per root (a dropped root costs a list pop).
    Each draw is a dropped root's ``traceparent`` (a str, with ``flags``) or a kept root's
    trace id (an int, for the SDK's span). Safe from any thread (a list pop is atomic);
    emptied in a forked child."""

    SIZE = 128

    def __init__(self, ids: HandedIds, bound: int, flags: int) -> None:
        self._hand_over = ids.hand_over
        self._bound = None if bound > TRACE_ID_LIMIT else f"{bound:016x}"
        self._suffix = f"-{flags:02x}"
        self._ready: list[str | int] = []
        _DRAWS.add(self)

    def dropped(self) -> str | None:
        try:
            drawn = self._ready.pop()
        except IndexError:
            fresh = self._draw()
            drawn = fresh.pop()
            self._ready = fresh  # a thread refilling at the same time only wastes its draws
        if isinstance(drawn, str):
            return drawn
        self._hand_over(drawn)
        return None

    def forget(self) -> None:
        self._ready = []

    def _draw(self) -> list[str | int]:
        width = 48  # 32 hex digits of trace id, then 16 of span id
        text = f"{random.getrandbits(192 * self.SIZE):0{width * self.SIZE}x}"
        bound, suffix = self._bound, self._suffix
        drawn: list[str | int] = []
        for start in range(0, width * self.SIZE, width):
            trace_id, span_id = text[start : start + 32], text[start + 32 : start + width]
            if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
                continue  # invalid ids: the SDK draws again, so skip it
            # The ratio sampler keeps a root whose lower 64 bits are under its bound; as hex
            # of one length, the strings compare as the numbers do.
            if bound is None or trace_id[16:] < bound:
                drawn.append(int(trace_id, 16))
            else:
                drawn.append(f"00-{trace_id}-{span_id}{suffix}")
        return drawn or self._draw()  # all invalid: 2 ** -64 each, but never an empty list
