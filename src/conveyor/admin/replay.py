"""Replaying a dead letter queue: move its messages back to where they came from."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import OFFSET_STORED, ConsumerClient
from conveyor.errors import ConveyorError, KafkaError
from conveyor.instrumentation import events as ev

if TYPE_CHECKING:
    from conveyor.app import App

__all__ = ["redrive_dead_letters", "replay_dead_letters", "restored"]

_ORIGINAL_PREFIX = "original_"


def restored(raw: Any, dlq_topic: str, to: str | None) -> dict[str, Any]:
    """A dead letter (librdkafka's message) as the message to produce again: to ``to`` or its
    ``original_topic``, with its key, payload and headers, the ``original_*`` ones dropped.

    Raises:
        ConveyorError: no ``to`` and no ``original_topic`` header.
    """
    headers = list(raw.headers() or [])
    target = to or (dict(headers).get("original_topic") or b"").decode()
    if not target:
        raise ConveyorError(
            f"{dlq_topic}/{raw.partition()}@{raw.offset()} has no original_topic header; "
            "give the target with --to TOPIC"
        )
    kept = [(name, value) for name, value in headers if not name.startswith(_ORIGINAL_PREFIX)]
    return {"topic": target, "payload": raw.value(), "key": raw.key(), "headers": kept}


def _reader(app: App, group: str, monitor: Any) -> ConsumerClient:
    kafka = {
        k: v
        for k, v in app.settings.kafka.items()
        if not k.startswith(("transactional.", "group."))
    }

    def on_fetch_error(error: KafkaError) -> None:
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(ev.ERROR_OCCURRED, type="replay.fetch.error", error=error)

    return ConsumerClient(
        {
            **kafka,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        },  # a read ends at the end, markers or not
        on_fetch_error=on_fetch_error,
    )


def replay_dead_letters(
    app: App,
    dlq_topic: str,
    to: str | None = None,
    limit: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float = 60.0,
) -> dict[str, int]:
    """Produce the messages of ``dlq_topic`` again, to their ``original_topic`` (or ``to``), with
    their key, payload and headers as they were (the ``original_*`` headers dropped).

    Progress is kept in the consumer group ``<client_id>-dlq-replay-<dlq_topic>``, so a second
    replay moves only what arrived since. Returns how many messages went to each topic.
    ``on_progress(done, total)`` is called after each chunk.
    """
    admin = app.admin
    partitions = [p.partition for p in admin.topic_info(dlq_topic).partitions]
    ends = {p: admin.read_watermark_offsets(dlq_topic, p)[1] for p in partitions}
    group = f"{app.settings.client_id}-dlq-replay-{dlq_topic}"
    client = _reader(app, group, app.monitor)
    counts: dict[str, int] = {}
    done = 0
    positions: dict[int, int] = {}
    try:
        client.assign((dlq_topic, p, OFFSET_STORED) for p in partitions if ends[p] > 0)
        # The last offset replayed before, per partition (-1: none yet).
        committed = {p: -1 for p in partitions}
        for lag in admin.read_lags([group]):
            if lag.topic == dlq_topic and lag.committed is not None:
                committed[lag.partition] = lag.committed - 1
        total = sum(ends.values())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (limit is None or done < limit):
            if all(
                positions.get(p, committed[p]) >= ends[p] - 1 for p in partitions if ends[p] > 0
            ):
                break
            batch = client.poll_batch(0.5, 500 if limit is None else min(500, limit - done))
            messages = []
            for raw in batch:
                if raw.error() is not None:
                    client.fetch_error(raw)
                    continue
                if raw.offset() >= ends[raw.partition()]:
                    continue
                message = restored(raw, dlq_topic, to)
                messages.append(message)
                target = message["topic"]
                counts[target] = counts.get(target, 0) + 1
                positions[raw.partition()] = raw.offset()
            if messages:
                app.producer.produce_many_sync(messages)
                client.commit([(dlq_topic, p, o + 1) for p, o in positions.items()])
                done += len(messages)
                if on_progress is not None:
                    on_progress(done, total if limit is None else min(total, limit))
    finally:
        client.close()
    return counts


def redrive_dead_letters(
    app: App,
    dlq_topic: str,
    selection: Iterable[tuple[int, int]],
    to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Produce the dead letters at ``selection`` ((partition, offset) pairs) of ``dlq_topic``
    again, as :func:`replay_dead_letters` does (to their ``original_topic`` or ``to``), and
    leave the replay group's progress alone. Returns ``{"counts": {topic: n}, "missing":
    [(partition, offset)]}`` (offsets that hold no message: deleted, compacted, past the end).
    """
    wanted: dict[int, set[int]] = {}
    for partition, offset in selection:
        wanted.setdefault(int(partition), set()).add(int(offset))
    total = sum(len(offsets) for offsets in wanted.values())
    counts: dict[str, int] = {}
    missing: list[tuple[int, int]] = []
    admin = app.admin
    known = {p.partition for p in admin.topic_info(dlq_topic).partitions}
    client = _reader(app, f"{app.settings.client_id}-dlq-redrive", app.monitor)
    done = 0
    try:
        for partition in sorted(wanted):
            offsets = sorted(wanted[partition])
            if partition not in known:
                missing.extend((partition, offset) for offset in offsets)
                continue
            low, high = admin.read_watermark_offsets(dlq_topic, partition)
            present = [offset for offset in offsets if low <= offset < high]
            missing.extend((partition, offset) for offset in offsets if not low <= offset < high)
            if not present:
                continue
            client.assign([(dlq_topic, partition, present[0])])
            left = set(present)
            last = present[-1]
            deadline = time.monotonic() + timeout
            messages = []
            position = present[0]
            while left and position <= last and time.monotonic() < deadline:
                for raw in client.poll_batch(0.5, 500):
                    if raw.error() is not None:
                        if client.fetch_error(raw):  # the end: what is left is not there
                            position = last + 1
                            break
                        continue
                    position = raw.offset() + 1
                    if raw.offset() in left:
                        left.discard(raw.offset())
                        messages.append(restored(raw, dlq_topic, to))
                    if position > last:
                        break
            missing.extend((partition, offset) for offset in sorted(left))
            if messages:
                app.producer.produce_many_sync(messages)
                for message in messages:
                    counts[message["topic"]] = counts.get(message["topic"], 0) + 1
            done += len(offsets)
            if on_progress is not None:
                on_progress(done, total)
    finally:
        client.close()
    return {"counts": counts, "missing": missing}
