"""The wire format of scheduled messages: what ``producer.produce_at`` writes into the
schedules topic, and the tombstone that cancels one (see :mod:`conveyor.schedules.dispatcher`)."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = [
    "DEFAULT_TOPIC",
    "RECURRING_TOPIC",
    "app_topic",
    "cancel_message",
    "cancels",
    "schedule_message",
    "scheduled_for",
]

DEFAULT_TOPIC = "conveyor_schedules"
"""The schedules topic of a producer that belongs to no app; an app's is :func:`app_topic`."""
RECURRING_TOPIC = "conveyor_recurring"
"""The recurring tasks' topic (``app.recurring``) unless the first task names another (here,
beside the producer's, so that the app names it without loading the recurring tasks)."""
AT = "conveyor-schedule-at"  # epoch milliseconds
TOPIC = "conveyor-schedule-topic"
KEY = "conveyor-schedule-key"
PARTITION = "conveyor-schedule-partition"
STATE = "conveyor-schedule-state"  # on tombstones: cancelled or dispatched
OFFSET = "conveyor-schedule-offset"  # on a dispatched tombstone: the offset of what was sent
NULL = "conveyor-schedule-null"  # the message to send has no payload (a tombstone of its own)
OURS = (AT, TOPIC, KEY, PARTITION, STATE, OFFSET, NULL)
_LATEST = 4102444800000  # 2100-01-01 in epoch milliseconds: later is surely a unit mistake


_NOT_IN_A_TOPIC = re.compile(r"[^A-Za-z0-9._-]")
_LONGEST_TOPIC = 249


def app_topic(group: str) -> str:
    """The schedules topic of the app whose consumer group is ``group`` when it names none:
    ``<group>_schedules`` (``conveyor_schedules`` for an app with the default name), so that
    two apps on one cluster do not dispatch each other's schedules. A character a topic name
    cannot hold becomes ``_``; a name too long for Kafka is cut and ends with a hash of the
    group instead."""
    topic = f"{_NOT_IN_A_TOPIC.sub('_', group)}_schedules"
    if len(topic) > _LONGEST_TOPIC:
        digest = hashlib.sha256(group.encode()).hexdigest()[:16]
        topic = f"{topic[: _LONGEST_TOPIC - len(digest) - len('-_schedules')]}-{digest}_schedules"
    return topic


def _epoch_ms(when: datetime | float) -> int:
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ConfigurationError(
                f"when must be a datetime with a time zone, got {when!r}", "when"
            )
        milliseconds = int(when.timestamp() * 1000)
    elif isinstance(when, bool) or not isinstance(when, int | float):
        raise ConfigurationError(f"when must be a datetime or epoch seconds, got {when!r}", "when")
    else:
        milliseconds = int(when * 1000)
    if not 0 <= milliseconds <= _LATEST:
        raise ConfigurationError(
            f"when {when!r} is before 1970 or after 2100 (epoch seconds, not milliseconds?)",
            "when",
        )
    return milliseconds


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def schedule_message(
    when: datetime | float,
    *,
    topic: str,
    payload: Any = None,
    key: str | bytes | None = None,
    headers: Any = None,
    partition: int | None = None,
    id: str | None = None,
    schedules_topic: str = DEFAULT_TOPIC,
) -> tuple[str, dict[str, Any]]:
    """The schedule id, and the message to produce into the schedules topic.

    Raises:
        ConfigurationError: a naive datetime, no topic, or a header name Conveyor uses.
    """
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError("a scheduled message needs a topic", "topic")
    schedule_id = id if id is not None else uuid.uuid4().hex
    if not isinstance(schedule_id, str) or not schedule_id:
        raise ConfigurationError(f"id must be a non-empty string, got {id!r}", "id")
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or ())
    if any(name in OURS for name, _ in pairs):
        raise ConfigurationError("headers named conveyor-schedule-* are Conveyor's", "headers")
    ours: list[tuple[str, Any]] = [(AT, str(_epoch_ms(when))), (TOPIC, topic)]
    if key is not None:
        ours.append((KEY, _bytes(key)))
    if partition is not None:
        ours.append((PARTITION, str(int(partition))))
    if payload is None:  # stored as empty bytes: a null value would read as a cancellation
        ours.append((NULL, b""))
        payload = b""
    message = {
        "topic": schedules_topic,
        "key": schedule_id,
        "payload": payload,
        "headers": ours + pairs,
    }
    return schedule_id, message


def cancel_message(schedule_id: str, schedules_topic: str = DEFAULT_TOPIC) -> dict[str, Any]:
    """The tombstone that cancels schedule ``schedule_id``."""
    return {
        "topic": schedules_topic,
        "key": schedule_id,
        "payload": None,
        "headers": [(STATE, "cancelled")],
    }


def scheduled_for(headers: Mapping[str, Any]) -> tuple[float, str, int | None] | None:
    """A scheduled message's due time (epoch seconds), destination topic and partition from
    its headers; ``None`` when they are malformed (the dispatcher skips such a message)."""
    try:
        at = int(headers[AT]) / 1000
        topic = headers[TOPIC].decode()
        partition = int(headers[PARTITION]) if PARTITION in headers else None
    except (KeyError, ValueError, AttributeError, TypeError):
        return None
    return at, topic, partition


def cancels(headers: Mapping[str, Any], pending_offset: int | None) -> bool:
    """Whether a tombstone with ``headers`` ends the pending schedule stored at
    ``pending_offset``: a cancellation ends any; a dispatched tombstone only the version it
    sent (a newer schedule under the same id stays)."""
    sent = headers.get(OFFSET)
    return sent is None or (pending_offset is not None and str(pending_offset).encode() == sent)
