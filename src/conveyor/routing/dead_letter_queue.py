"""Dead letter queues: what to do with a message that keeps failing, and how it is moved.

After ``max_retries`` failed retries (or when a ``strategy`` says so) the first message not
yet marked is dispatched to the DLQ topic with the original payload, key and headers plus
``original_*`` headers, marked, and processing goes on from the next message. With
``"topic": False`` it is skipped instead (with a warning and an event).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = ["DeadLetterQueue", "dlq_message", "parse_dead_letter_queue", "source_headers"]

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
_ACTIONS = frozenset({"retry", "dispatch", "skip"})


@dataclass(frozen=True)
class DeadLetterQueue:
    """A topic's validated ``dead_letter_queue`` settings."""

    topic: str | None
    """The DLQ topic; ``None`` means skip the message after the retries."""
    max_retries: int = 3
    independent: bool = False
    dispatch_method: str = "produce_async"
    marking_method: str = "mark_as_consumed"
    transactional: bool = False
    strategy: Strategy | None = None

    def decide(self, error: BaseException, failures: int) -> str:
        """What to do after ``failures`` failed attempts: retry, dispatch or skip."""
        if self.strategy is not None:
            action = self.strategy(error, failures)
            if action not in _ACTIONS:
                raise ConfigurationError(
                    f"the dead letter queue strategy returned {action!r}; expected retry, dispatch or skip",
                    "strategy",
                )
            if action == "dispatch" and self.topic is None:
                return "skip"
            return action
        if failures <= self.max_retries:
            return "retry"
        return "dispatch" if self.topic is not None else "skip"


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


def dlq_message(
    raw: Any, dlq_topic: str, group: str, attempts: int, error: BaseException | None
) -> dict[str, Any]:
    """The DLQ copy of ``raw``: payload, key and headers kept, ``original_*`` headers added."""
    kind, timestamp = raw.timestamp()
    headers: list[tuple[str, Any]] = list(raw.headers() or [])
    key = raw.key()
    headers += [
        ("original_topic", raw.topic()),
        ("original_partition", str(raw.partition())),
        ("original_offset", str(raw.offset())),
        ("original_key", key if key is not None else b""),
        ("original_timestamp", str(timestamp if kind else "")),
        ("original_consumer_group", group),
        ("original_attempts", str(attempts)),
        ("original_error_class", type(error).__qualname__ if error is not None else ""),
        ("original_error_message", str(error) if error is not None else ""),
        (
            "original_error_backtrace",
            "".join(traceback.format_exception(error))[-8000:] if error is not None else "",
        ),
    ]
    return {"topic": dlq_topic, "payload": raw.value(), "key": key, "headers": headers}


def source_headers(raw: Any, group: str) -> list[tuple[str, str]]:
    """The headers a piped message carries about where it came from."""
    return [
        ("source_topic", raw.topic()),
        ("source_partition", str(raw.partition())),
        ("source_offset", str(raw.offset())),
        ("source_consumer_group", group),
    ]
