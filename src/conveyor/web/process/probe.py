"""What every thread of this process is doing now (the ``probe`` command)."""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Any

__all__ = ["thread_stacks"]

_MAX_FRAMES = 40  # the innermost ones: where a thread is stuck


def thread_stacks() -> list[dict[str, Any]]:
    """Each live thread's name, id, daemon flag and stack (innermost frame last), sorted by
    name."""
    frames = sys._current_frames()
    stacks = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident is not None else None
        summary = traceback.extract_stack(frame)[-_MAX_FRAMES:] if frame is not None else []
        stacks.append(
            {
                "name": thread.name,
                "ident": thread.ident,
                "daemon": thread.daemon,
                "stack": "".join(traceback.format_list(summary)),
            }
        )
    return sorted(stacks, key=lambda entry: str(entry["name"]))
