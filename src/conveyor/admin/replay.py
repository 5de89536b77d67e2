"""Replaying a dead letter queue: move its messages back to where they came from."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from conveyor.driver.consumers import OFFSET_STORED, ConsumerClient
from conveyor.errors import ConveyorError, KafkaError
from conveyor.instrumentation import events as ev

if TYPE_CHECKING:
    from conveyor.app import App

__all__ = ["replay_dead_letters"]

_ORIGINAL_PREFIX = "original_"


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
    kafka = {
        k: v
        for k, v in app.settings.kafka.items()
        if not k.startswith(("transactional.", "group."))
    }
    monitor = app.monitor

    def on_fetch_error(error: KafkaError) -> None:
        if ev.ERROR_OCCURRED in monitor.subscribed:
            monitor.instrument(ev.ERROR_OCCURRED, type="replay.fetch.error", error=error)

    client = ConsumerClient(
        {**kafka, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"},
        on_fetch_error=on_fetch_error,
    )
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
                headers = list(raw.headers() or [])
                original = dict(headers)
                target = to or (original.get("original_topic") or b"").decode()
                if not target:
                    raise ConveyorError(
                        f"{dlq_topic}/{raw.partition()}@{raw.offset()} has no original_topic header; "
                        "give the target with --to TOPIC"
                    )
                kept = [
                    (name, value)
                    for name, value in headers
                    if not name.startswith(_ORIGINAL_PREFIX)
                ]
                messages.append(
                    {"topic": target, "payload": raw.value(), "key": raw.key(), "headers": kept}
                )
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
