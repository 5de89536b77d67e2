"""Finishing what a user's hook returned: a coroutine (an ``async def`` hook) runs to its end
on the calling thread's own event loop; anything else is returned as it is.

Apart from the worker pool, so that the RPC handlers (which run hooks too) need nothing of
the processing engine.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

__all__ = ["close_thread_loop", "run_hook"]

_local = threading.local()

# A plain function's result: None, or a value (an RPC handler's) that is no awaitable
# (inspect.isawaitable costs an ABC check).
_PLAIN_RESULTS = frozenset({bool, bytes, dict, float, int, list, str, tuple})


def run_hook(result: Any) -> Any:
    """Finish a hook's result: await it on this thread's own event loop when it is a coroutine."""
    if result is None or type(result) in _PLAIN_RESULTS:
        return result
    if inspect.isawaitable(result):
        loop = getattr(_local, "loop", None)
        if loop is None:
            loop = _local.loop = asyncio.new_event_loop()
        return loop.run_until_complete(result)
    return result


def close_thread_loop() -> None:
    """Close the calling thread's event loop, if a hook made one (a worker that ends)."""
    loop = getattr(_local, "loop", None)
    if loop is not None:
        loop.close()
        _local.loop = None
