"""Dead letter queues as the web UI shows them: which topics are DLQs (declared by the routes'
``dead_letter_queue`` settings or, for topics no route declares, named so), and a DLQ's
messages grouped by where they came from and why they failed (their ``original_*`` headers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = [
    "DeadLetter",
    "DeadLetterGroup",
    "dead_letter_topics",
    "group_dead_letters",
    "parse_refs",
    "read",
]

_NAMED = re.compile(r"dlq|dead[_.\-]?letter", re.IGNORECASE)
# A dead job says why in headers of its own (conveyor.jobs.wire): read as a dead letter's.
_JOB_CLASS, _JOB_MESSAGE, _JOB_ATTEMPT = (
    "conveyor-job-error-class",
    "conveyor-job-error-message",
    "conveyor-job-attempt",
)


def dead_letter_topics(
    declared: Mapping[str, Iterable[str]], existing: Iterable[str]
) -> list[dict[str, Any]]:
    """The DLQ topics among ``existing``: those a route declares (``declared`` maps a DLQ
    topic to the topics whose failures go there) and, of the others, those whose name says
    so (``dlq``, ``dead_letter``, ``dead-letter``, ``deadletter``, any case). Internal topics
    (``__...``) are left out. Sorted by name; each ``{"name", "sources", "by"}`` where ``by``
    is ``"routes"`` or ``"name"`` and ``exists`` says whether the topic is on the cluster."""
    present = {name for name in existing if not name.startswith("__")}
    found = {
        name: {
            "name": name,
            "sources": sorted(set(sources)),
            "by": "routes",
            "exists": name in present,
        }
        for name, sources in declared.items()
    }
    for name in present:
        if name not in found and _NAMED.search(name):
            found[name] = {"name": name, "sources": [], "by": "name", "exists": True}
    return [found[name] for name in sorted(found)]


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter: where it is in the DLQ and what its ``original_*`` headers say."""

    partition: int
    offset: int
    timestamp: float | None
    original_topic: str
    original_partition: int | None
    original_offset: int | None
    error_class: str
    error_message: str
    attempts: int | None
    key: str | None
    validation_errors: tuple[dict[str, str], ...] = ()
    """What was wrong with a payload that did not fit its model: ``{"path", "message"}`` each
    (the ``original_validation_errors`` header; empty for other failures)."""

    @property
    def ref(self) -> str:
        """``partition:offset``, how the UI names a selected dead letter."""
        return f"{self.partition}:{self.offset}"


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


def _number(value: bytes | None) -> int | None:
    try:
        return int(_text(value))
    except ValueError:
        return None


def _field_errors(value: bytes | None) -> tuple[dict[str, str], ...]:
    """The ``original_validation_errors`` header, or nothing when absent or not as written."""
    if not value:
        return ()
    try:
        errors = json.loads(value)
    except ValueError:
        return ()
    if not isinstance(errors, list):
        return ()
    return tuple(
        {"path": str(item.get("path", "")), "message": str(item.get("message", ""))}
        for item in errors
        if isinstance(item, dict)
    )


def read(raw: Any) -> DeadLetter:
    """librdkafka's message ``raw`` (from a DLQ) as a :class:`DeadLetter` (missing headers
    read as empty: a message put there by hand is still shown)."""
    headers: dict[str, bytes | None] = {}
    for name, value in raw.headers() or ():
        headers.setdefault(name, value)
    kind, stamp = raw.timestamp()
    key = raw.key()
    return DeadLetter(
        partition=raw.partition(),
        offset=raw.offset(),
        timestamp=stamp / 1000 if kind and stamp >= 0 else None,
        original_topic=_text(headers.get("original_topic")),
        original_partition=_number(headers.get("original_partition")),
        original_offset=_number(headers.get("original_offset")),
        error_class=_text(headers.get("original_error_class") or headers.get(_JOB_CLASS))
        or "(none)",
        error_message=_text(headers.get("original_error_message") or headers.get(_JOB_MESSAGE)),
        attempts=_number(headers.get("original_attempts") or headers.get(_JOB_ATTEMPT)),
        key=None if key is None else key.decode("utf-8", "replace"),
        validation_errors=_field_errors(headers.get("original_validation_errors")),
    )


@dataclass
class DeadLetterGroup:
    """The dead letters of one original topic and partition that failed with one error
    class: how many, the newest, and a sample error message."""

    original_topic: str
    original_partition: int | None
    error_class: str
    letters: list[DeadLetter] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.letters)

    @property
    def newest(self) -> float | None:
        stamps = [letter.timestamp for letter in self.letters if letter.timestamp is not None]
        return max(stamps) if stamps else None

    @property
    def sample(self) -> str:
        return self.letters[-1].error_message if self.letters else ""

    @property
    def refs(self) -> list[str]:
        return [letter.ref for letter in self.letters]

    def to_dict(self) -> dict[str, Any]:
        return {
            "original_topic": self.original_topic,
            "original_partition": self.original_partition,
            "error_class": self.error_class,
            "count": self.count,
            "newest": self.newest,
            "sample": self.sample,
            "refs": self.refs,
        }


def group_dead_letters(letters: Iterable[DeadLetter]) -> list[DeadLetterGroup]:
    """``letters`` grouped by (original topic, original partition, error class), the largest
    group first."""
    groups: dict[tuple[str, int | None, str], DeadLetterGroup] = {}
    for letter in letters:
        where = (letter.original_topic, letter.original_partition, letter.error_class)
        group = groups.get(where)
        if group is None:
            group = groups[where] = DeadLetterGroup(*where)
        group.letters.append(letter)
    return sorted(
        groups.values(),
        key=lambda g: (-g.count, g.original_topic, g.original_partition or -1, g.error_class),
    )


def parse_refs(values: list[str]) -> list[tuple[int, int]]:
    """``["0:12", "1:3"]`` as (partition, offset) pairs.

    Raises:
        ConfigurationError: a malformed one.
    """
    pairs = []
    for value in values:
        partition, colon, offset = value.partition(":")
        if not colon or not partition.isdigit() or not offset.isdigit():
            raise ConfigurationError(f"{value!r} is not partition:offset", "refs")
        pairs.append((int(partition), int(offset)))
    return pairs
