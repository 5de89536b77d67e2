"""Replaying a dead letter queue: move its messages back to where they came from."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import OFFSET_STORED, ConsumerClient
from conveyor.errors import ConveyorError, KafkaError, WaitTimeoutError
from conveyor.instrumentation import events as ev

if TYPE_CHECKING:
    from conveyor.host import Host

__all__ = ["Restore", "redrive_dead_letters", "replay_dead_letters", "restored"]

_ORIGINAL_PREFIX = "original_"

Restore = Callable[[Any, str, "str | None"], "dict[str, Any] | None"]
"""``restore(raw, dlq_topic, to)``: the message to produce again for one dead letter, or
``None`` to leave it where it is (counted as done)."""


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


def _reader(app: Host, group: str, monitor: Any) -> ConsumerClient:
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
    app: Host,
    dlq_topic: str,
    to: str | None = None,
    limit: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float = 60.0,
    counts: dict[str, int] | None = None,
    restore: Restore | None = None,
) -> dict[str, int]:
    """Produce the messages of ``dlq_topic`` again, to their ``original_topic`` (or ``to``), with
    their key, payload and headers as they were (the ``original_*`` headers dropped; another
    ``restore(raw, dlq_topic, to)`` makes each message otherwise: dead jobs, say).

    Progress is kept in the consumer group ``<client_id>-dlq-replay-<dlq_topic>``, so a second
    replay moves only what arrived since. Returns how many messages went to each topic (also
    kept in ``counts`` as they go, when given). ``on_progress(done, total)`` is called after
    each chunk (``total``: what was not replayed yet when this replay began).

    Raises:
        WaitTimeoutError: ``timeout`` passed first (what was moved is committed: run it again
            to go on).
        ConveyorError: a dead letter without an ``original_topic`` header and no ``to``.
    """
    admin = app.admin
    partitions = [p.partition for p in admin.topic_info(dlq_topic).partitions]
    ends = {p: admin.read_watermark_offsets(dlq_topic, p)[1] for p in partitions}
    group = f"{app.settings.client_id}-dlq-replay-{dlq_topic}"
    counts = {} if counts is None else counts
    # The next offset to replay per partition (from the group; 0 when it has none yet).
    start = dict.fromkeys(partitions, 0)
    for lag in admin.read_lags([group]):
        if lag.topic == dlq_topic and lag.committed is not None:
            start[lag.partition] = lag.committed
    pending = {p for p in partitions if start[p] < ends[p]}
    total = sum(ends[p] - start[p] for p in pending)
    if not pending:
        return counts
    client = _reader(app, group, app.monitor)
    done = 0
    try:
        client.assign((dlq_topic, p, OFFSET_STORED) for p in pending)
        deadline = time.monotonic() + timeout
        while pending and (limit is None or done < limit):
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"replaying {dlq_topic} took longer than {timeout:g} s: {done:,} of "
                    f"{total:,} moved (and committed); run it again to go on"
                )
            batch = client.poll_batch(0.5, 500 if limit is None else min(500, limit - done))
            messages = []
            positions: dict[int, int] = {}
            for raw in batch:
                partition = raw.partition()
                if raw.error() is not None:
                    if client.fetch_error(raw):  # the end (its last offsets may be markers)
                        pending.discard(partition)
                    continue
                if partition not in pending or raw.topic() != dlq_topic:
                    continue
                if raw.offset() >= ends[partition]:
                    pending.discard(partition)
                    continue
                message = (restore or restored)(raw, dlq_topic, to)
                if message is not None:
                    messages.append(message)
                positions[partition] = raw.offset()
                if raw.offset() >= ends[partition] - 1:
                    pending.discard(partition)
            if messages:
                app.producer.produce_many_sync(messages)
            if positions:
                client.commit([(dlq_topic, p, o + 1) for p, o in positions.items()])
                for message in messages:
                    counts[message["topic"]] = counts.get(message["topic"], 0) + 1
                done += len(messages)
                if on_progress is not None:
                    on_progress(done, total if limit is None else min(total, limit))
    finally:
        client.close()
    return counts


_RUN_GAP = 1_000  # selected offsets further apart than this are read as separate runs


def redrive_dead_letters(
    app: Host,
    dlq_topic: str,
    selection: Iterable[tuple[int, int]],
    to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float = 60.0,
    counts: dict[str, int] | None = None,
    restore: Restore | None = None,
) -> dict[str, Any]:
    """Produce the dead letters at ``selection`` ((partition, offset) pairs) of ``dlq_topic``
    again, as :func:`replay_dead_letters` does (to their ``original_topic`` or ``to``; made
    by ``restore`` when given), and
    leave the replay group's progress alone. Offsets far apart are read separately (seeking,
    not scanning between them). Returns ``{"counts": {topic: n}, "missing": [(partition,
    offset)], "unroutable": [...], "timed_out": [...]}``: offsets that hold no message
    (deleted, compacted, markers, past the end), dead letters without an ``original_topic``
    header when no ``to`` is given (not sent), and those not reached before ``timeout``.
    ``counts`` (when given) is filled as the messages go out.
    """
    wanted: dict[int, set[int]] = {}
    for partition, offset in selection:
        wanted.setdefault(int(partition), set()).add(int(offset))
    total = sum(len(offsets) for offsets in wanted.values())
    counts = {} if counts is None else counts
    missing: list[tuple[int, int]] = []
    unroutable: list[tuple[int, int]] = []
    timed_out: list[tuple[int, int]] = []
    admin = app.admin
    known = {p.partition for p in admin.topic_info(dlq_topic).partitions}
    client = _reader(app, f"{app.settings.client_id}-dlq-redrive", app.monitor)
    deadline = time.monotonic() + timeout
    done = 0
    try:
        for partition in sorted(wanted):
            offsets = sorted(wanted[partition])
            if partition not in known:
                missing.extend((partition, offset) for offset in offsets)
                continue
            low, high = admin.read_watermark_offsets(dlq_topic, partition)
            missing.extend((partition, o) for o in offsets if not low <= o < high)
            for run in _runs([o for o in offsets if low <= o < high]):
                left = set(run)
                messages = []
                client.assign([(dlq_topic, partition, run[0])])
                position = run[0]
                while left and position <= run[-1]:
                    if time.monotonic() >= deadline:
                        timed_out.extend((partition, o) for o in sorted(left))
                        left.clear()
                        break
                    for raw in client.poll_batch(0.5, 500):
                        if raw.error() is not None:
                            if client.fetch_error(raw):  # the end: what is left is not there
                                position = run[-1] + 1
                                break
                            continue
                        if raw.partition() != partition or raw.topic() != dlq_topic:
                            continue  # from an earlier assignment
                        position = raw.offset() + 1
                        if raw.offset() in left:
                            left.discard(raw.offset())
                            if to is None and not dict(raw.headers() or []).get("original_topic"):
                                unroutable.append((partition, raw.offset()))
                            else:
                                message = (restore or restored)(raw, dlq_topic, to)
                                if message is not None:
                                    messages.append(message)
                        if position > run[-1]:
                            break
                missing.extend((partition, offset) for offset in sorted(left))
                if messages:
                    app.producer.produce_many_sync(messages)
                    for message in messages:
                        counts[message["topic"]] = counts.get(message["topic"], 0) + 1
                done += len(run)
                if on_progress is not None:
                    on_progress(done, total)
    finally:
        client.close()
    return {"counts": counts, "missing": missing, "unroutable": unroutable, "timed_out": timed_out}


def _runs(offsets: list[int]) -> list[list[int]]:
    """Sorted offsets as runs that are each read in one pass (no gap above ``_RUN_GAP``)."""
    runs: list[list[int]] = []
    for offset in offsets:
        if runs and offset - runs[-1][-1] <= _RUN_GAP:
            runs[-1].append(offset)
        else:
            runs.append([offset])
    return runs
