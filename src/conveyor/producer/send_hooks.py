"""Send hooks: something that sees every message a producer sends, changes its headers and
is told how its delivery went (tracing's context injection is one)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Hooked", "SendHook"]

_log = logging.getLogger("conveyor.producer")


class SendHook(Protocol):
    """Something that sees every message a producer sends (see :meth:`Producer.add_send_hook`)."""

    def sending(
        self, topic: str, key: Any, partition: int, headers: list[tuple[str, Any]] | None
    ) -> tuple[list[tuple[str, Any]] | None, Callable[[Any, Any], None] | None]:
        """The headers to send instead, and ``finish(error, message)`` to call on the delivery
        report (``message`` is ``None`` when librdkafka refused it at once) or ``None``."""
        ...


class Hooked:
    """A delivery callback that lets the send hooks finish first."""

    __slots__ = ("callback", "finishers")

    def __init__(
        self,
        callback: Callable[[Any, Any], None],
        finishers: tuple[Callable[[Any, Any], None], ...],
    ) -> None:
        self.callback = callback
        self.finishers = finishers

    def __call__(self, error: Any, message: Any) -> None:
        self._finish(error, message)
        self.callback(error, message)

    def fail(self, error: BaseException) -> None:
        """The message was refused before it was queued: it will get no delivery report."""
        self._finish(error, None)

    def _finish(self, error: Any, message: Any) -> None:
        for finish in self.finishers:
            try:
                finish(error, message)
            except Exception:
                _log.exception("a send hook failed on a delivery report")
