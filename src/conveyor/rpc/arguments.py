"""``InvalidArguments`` and ``ArgumentChecker`` where RPC users found them: checking values
against type hints is the typed messages' concern, so both live in
:mod:`conveyor.models.arguments` (jobs check their arguments with it too)."""

from __future__ import annotations

from conveyor.models.arguments import ArgumentChecker, InvalidArguments

__all__ = ["ArgumentChecker", "InvalidArguments"]
