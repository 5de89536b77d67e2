"""The ``dead_letter_queue`` route option: its settings and their validation.

What happens with them when ``consume()`` raises (retries, back-off, dispatch or skip,
marking) is :mod:`conveyor.processing.strategies`; the dead letter copy of a message is
built by :func:`conveyor.messages.dead_letter_message`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = ["ACTIONS", "DeadLetterQueue", "Strategy", "parse_dead_letter_queue"]

Strategy = Callable[[BaseException, int], str]
"""``(error, attempt) -> "retry" | "dispatch" | "skip"``."""

_KEYS = frozenset(
    {
        "topic",
        "max_retries",
        "independent",
        "dispatch_method",
        "marking_method",
        "transactional",
        "strategy",
    }
)
ACTIONS = frozenset({"retry", "dispatch", "skip"})
"""What a strategy may answer."""


@dataclass(frozen=True)
class DeadLetterQueue:
    """A topic's validated ``dead_letter_queue`` settings."""

    topic: str | None
    """The DLQ topic; ``None`` means skip the message after the retries."""
    max_retries: int = 3
    """Retries of a failing batch before its first unmarked message goes to the DLQ."""
    independent: bool = False
    """Count the retries of each message apart (a success resets the count)."""
    dispatch_method: str = "produce_async"
    """``"produce_async"`` or ``"produce_sync"`` (wait for the DLQ's acknowledgement)."""
    marking_method: str = "mark_as_consumed"
    """``"mark_as_consumed"`` or ``"mark_as_consumed_sync"`` (commit at once) after dispatch."""
    transactional: bool = False
    """Dispatch and mark in one transaction (the app's transactional producer)."""
    strategy: Strategy | None = None
    """Decides per failure: retry, dispatch or skip (see :mod:`conveyor.processing.strategies`)."""


def parse_dead_letter_queue(topic: str, value: Any) -> DeadLetterQueue | None:
    """Validate a route's ``dead_letter_queue`` option (``None`` when not given)."""
    if value is None:
        return None
    where = f"routes.topic({topic!r}): dead_letter_queue"
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{where} must be a dict, got {type(value).__name__}", "dead_letter_queue"
        )
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where} has an unknown key {unknown[0]!r}; known: {', '.join(sorted(_KEYS))}",
            unknown[0],
        )
    if "topic" not in value:
        raise ConfigurationError(
            f'{where} needs "topic" (a topic name, or False to skip failing messages)', "topic"
        )
    dlq_topic = value["topic"]
    if dlq_topic is not False and (not isinstance(dlq_topic, str) or not dlq_topic):
        raise ConfigurationError(
            f'{where}["topic"] must be a topic name or False, got {dlq_topic!r}', "topic"
        )
    if dlq_topic == topic:
        raise ConfigurationError(f"{where} cannot send failures to the topic itself", "topic")
    retries = value.get("max_retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(
            f'{where}["max_retries"] must be an integer >= 0, got {retries!r}', "max_retries"
        )
    dispatch = value.get("dispatch_method", "produce_async")
    if dispatch not in ("produce_async", "produce_sync"):
        raise ConfigurationError(
            f'{where}["dispatch_method"] must be produce_async or produce_sync', "dispatch_method"
        )
    marking = value.get("marking_method", "mark_as_consumed")
    if marking not in ("mark_as_consumed", "mark_as_consumed_sync"):
        raise ConfigurationError(
            f'{where}["marking_method"] must be mark_as_consumed or mark_as_consumed_sync',
            "marking_method",
        )
    strategy = value.get("strategy")
    if strategy is not None and not callable(strategy):
        raise ConfigurationError(
            f'{where}["strategy"] must be callable (error, attempt) -> action', "strategy"
        )
    for flag in ("independent", "transactional"):
        if not isinstance(value.get(flag, False), bool):
            raise ConfigurationError(f'{where}["{flag}"] must be True or False', flag)
    return DeadLetterQueue(
        topic=None if dlq_topic is False else dlq_topic,
        max_retries=retries,
        independent=value.get("independent", False),
        dispatch_method=dispatch,
        marking_method=marking,
        transactional=value.get("transactional", False),
        strategy=strategy,
    )
