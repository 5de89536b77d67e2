"""Fixtures of the unit tests: a clock of a machine booted just now."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest


class YoungClock:
    """``time.monotonic()`` of a machine booted as the test began: it reads near 0 and goes on
    in real time. ``time.monotonic()`` counts from the boot, so logic that takes a reading for
    large (``0.0`` or ``-interval`` as "long ago") works on a machine up for hours and fails
    minutes after a boot; under this clock it fails every time.

    :meth:`seen_by` makes it the clock of the modules under test (their ``time.monotonic``,
    ``time.perf_counter`` and ``time.monotonic_ns``; the rest of ``time`` is left as it is, and
    so is every other module: threading and asyncio keep the real clock)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self._real = time.monotonic
        self._origin = self._real()
        self._frozen: float | None = None

    def __call__(self) -> float:
        frozen = self._frozen
        return self._real() - self._origin if frozen is None else frozen

    def ns(self) -> int:
        return round(self() * 1e9)

    def seen_by(self, *modules: ModuleType) -> YoungClock:
        """Make this the clock of ``modules`` (each must ``import time``) for this test."""
        for module in modules:
            assert getattr(module, "time", None) is time, f"{module.__name__} has no `import time`"
            self._monkeypatch.setattr(module, "time", _TimeOf(self))
        return self

    def freeze(self, at: float) -> None:
        """Read ``at`` until :meth:`thaw` (a reading of exactly 0.0, say)."""
        self._frozen = at

    def thaw(self) -> None:
        """Go on in real time from where it stands."""
        frozen = self._frozen
        if frozen is not None:
            self._origin = self._real() - frozen
            self._frozen = None


class _TimeOf:
    """The ``time`` module as a module under :meth:`YoungClock.seen_by` sees it."""

    def __init__(self, clock: YoungClock) -> None:
        self.monotonic = self.perf_counter = clock
        self.monotonic_ns = clock.ns

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def young_clock(monkeypatch: pytest.MonkeyPatch) -> YoungClock:
    """A clock that starts near 0 (see :class:`YoungClock`); ``young_clock.seen_by(module)``
    puts it in the module under test."""
    return YoungClock(monkeypatch)
