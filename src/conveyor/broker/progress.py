"""How the broker part reports progress on long steps (downloads, certificates, starts)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ProgressCallback"]

ProgressCallback = Callable[[str], None]
"""Called with one line saying what is being done now (the CLI shows it beside a spinner)."""
