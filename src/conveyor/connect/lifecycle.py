"""When sinks open and close: before anything is consumed (an async sink on the event loop its
lanes run on), and after the consumers stopped (flushed, then closed)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.connect.consumer import SinkBinding
    from conveyor.processing.event_loop import EventLoopThread

__all__ = ["close_sinks", "open_sinks"]

_log = logging.getLogger("conveyor")


def open_sinks(
    bindings: Iterable[SinkBinding], topics: set[str], event_loop: EventLoopThread
) -> None:
    """Open the sinks of the routes of ``topics`` before anything is consumed (an async one
    on the event loop its lanes will run on); one that cannot open closes the ones opened
    before and raises."""
    opened = []
    try:
        for binding in bindings:
            if binding.topic in topics:
                if binding.asynchronous:
                    event_loop.call(binding.open_async(), timeout=60)
                else:
                    binding.open()
                opened.append(binding)
    except BaseException:
        close_sinks(opened, event_loop)
        raise


def close_sinks(bindings: Iterable[SinkBinding], event_loop: EventLoopThread) -> None:
    """After the consumers stopped: flush and close every sink (an async one on the event loop
    its lanes ran on); a sink that fails to close is logged."""
    for binding in bindings:
        try:
            if binding.asynchronous:
                if binding.opened:
                    event_loop.call(binding.close_async(), timeout=30)
            else:
                binding.close()
        except Exception:
            _log.exception("the sink of %r failed to close", binding.topic)
