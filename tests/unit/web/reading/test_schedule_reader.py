"""The Schedules page's reader keeps what it folded and where each partition stopped: a later
read asks only for the records written since and lists exactly what a read from the start
would; a partition whose unread records were deleted, or that became shorter than where the
reader stopped (the topic made again), starts the fold over; a topic that is gone is an empty
one. The recurring tasks' topic is kept the same way. No broker: a fake client holds the log."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.schedules.records import state_message
from conveyor.schedules.wire import cancel_message, schedule_message
from conveyor.web.reading import schedules as reading
from conveyor.web.reading.schedules import ScheduleReader
from unit.processing.fakes import ErrorRaw, FakeRaw

PARTITION_EOF = -191  # librdkafka's _PARTITION_EOF


class Log:
    """A topic's partitions: their records (offset -> message dict) and low watermarks."""

    def __init__(self, partitions: int = 1) -> None:
        self.records: dict[int, dict[int, dict[str, Any]]] = {p: {} for p in range(partitions)}
        self.low: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.high: dict[int, int] = dict.fromkeys(range(partitions), 0)

    def append(self, message: dict[str, Any], partition: int = 0) -> int:
        offset = self.high[partition]
        self.records[partition][offset] = message
        self.high[partition] = offset + 1
        return offset


class FakeClient:
    """What the reader uses of a consumer, over the topics of ``logs`` (``None``: gone);
    ``asked`` notes each assignment."""

    def __init__(self, logs: dict[str, Log | None], asked: list[list[tuple[str, int, int]]]):
        self.logs, self.asked = logs, asked
        self.pending: list[Any] = []

    def partitions(self, topic: str) -> list[int]:
        log = self.logs.get(topic)
        return [] if log is None else sorted(log.records)

    def query_watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        log = self.logs[topic]
        assert log is not None
        return log.low[partition], log.high[partition]

    def committed(self, partitions: Any, timeout: float) -> dict[Any, Any]:
        return {}

    def assign(self, starts: list[tuple[str, int, int]]) -> None:
        self.asked.append(sorted(starts))
        for topic, partition, start in sorted(starts):
            log = self.logs[topic]
            assert log is not None
            records = log.records[partition]
            for offset in sorted(o for o in records if o >= start):
                m = records[offset]
                headers = [(n, v if isinstance(v, bytes) else str(v).encode())
                           for n, v in m.get("headers") or ()]  # fmt: skip
                self.pending.append(FakeRaw(offset, topic=topic, partition=partition,
                                            value=m["payload"], key=m["key"].encode(),
                                            headers=headers))  # fmt: skip
            self.pending.append(ErrorRaw(PARTITION_EOF, partition=partition, topic=topic))

    def poll_batch(self, timeout: float, limit: int) -> list[Any]:
        batch, self.pending = self.pending[:limit], self.pending[limit:]
        return batch

    def fetch_error(self, raw: Any) -> bool:
        return bool(raw.error().code() == PARTITION_EOF)

    def close(self) -> None:
        pass


@pytest.fixture
def log() -> Log:
    return Log(partitions=2)


def reader_of(
    monkeypatch: pytest.MonkeyPatch, logs: dict[str, Log | None]
) -> tuple[ScheduleReader, list[list[tuple[str, int, int]]]]:
    """A reader whose clients read ``logs``, and the assignments they were asked for."""
    asked: list[list[tuple[str, int, int]]] = []
    monkeypatch.setattr(reading, "ConsumerClient", lambda settings: FakeClient(logs, asked))
    return ScheduleReader({"bootstrap.servers": "x"}), asked


def schedule(log: Log, at: float, partition: int = 0, id: str | None = None) -> str:
    schedule_id, message = schedule_message(at, topic="reminders", payload=b"x", id=id)
    log.append(message, partition)
    return schedule_id


def test_a_later_read_asks_only_for_what_was_written_since(
    monkeypatch: pytest.MonkeyPatch, log: Log
) -> None:
    reader, asked = reader_of(monkeypatch, {"s": log})
    ids = [schedule(log, 4e9 + n, partition=n % 2) for n in range(5)]
    first = reader.pending("s")
    assert ([m.id for m in first.messages], first.scanned) == (ids, 5)
    assert asked[-1] == [("s", 0, 0), ("s", 1, 0)]

    added = schedule(log, 4e9 + 10, partition=1)
    log.append(cancel_message(ids[0], "s"), 0)
    second = reader.pending("s")
    assert [m.id for m in second.messages] == [*ids[1:], added]
    assert second.scanned == 2
    assert asked[-1] == [("s", 0, 3), ("s", 1, 2)], "from where the first read stopped"

    third = reader.pending("s")
    assert (len(third.messages), third.scanned, len(asked)) == (5, 0, 2), "nothing to ask for"


def test_deleted_records_or_a_shorter_partition_start_the_fold_over(
    monkeypatch: pytest.MonkeyPatch, log: Log
) -> None:
    reader, asked = reader_of(monkeypatch, {"s": log})
    kept = schedule(log, 4e9)
    gone = schedule(log, 4e9 + 1, partition=1)
    assert len(reader.pending("s").messages) == 2

    log.append(cancel_message(kept, "s"), 0)
    del log.records[0][0], log.records[0][1]
    log.low[0] = 2  # deleted (retention) before the reader read the tombstone
    later = schedule(log, 4e9 + 3)
    again = reader.pending("s")
    assert [m.id for m in again.messages] == [gone, later], "read again from the start"
    assert asked[-1] == [("s", 0, 2), ("s", 1, 0)]

    fresh = Log(partitions=2)  # the topic made again: shorter than where the reader stopped
    new = schedule(fresh, 4e9 + 2)
    log.records, log.low, log.high = fresh.records, fresh.low, fresh.high
    assert [m.id for m in reader.pending("s").messages] == [new]
    assert asked[-1] == [("s", 0, 0)]


def test_a_topic_that_is_gone_is_an_empty_one(monkeypatch: pytest.MonkeyPatch, log: Log) -> None:
    logs: dict[str, Log | None] = {"s": log}
    reader, _ = reader_of(monkeypatch, logs)
    schedule(log, 4e9)
    assert len(reader.pending("s").messages) == 1
    logs["s"] = None
    read = reader.pending("s")
    assert (read.missing, read.messages) == (True, [])
    logs["s"] = Log(partitions=1)
    assert reader.pending("s").messages == [], "made again: nothing of the old one"


def test_the_tasks_topic_is_kept_too_and_handed_out_as_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = Log(partitions=1)
    reader, asked = reader_of(monkeypatch, {"t": log})
    log.append(state_message("t", "purge", enabled=False, by="ops"))
    tasks, read = reader.recurring("t")
    assert (tasks["purge"].enabled, read.scanned) == (False, 1)
    tasks["purge"].enabled = True  # the caller's copy: the kept state does not change
    log.append(state_message("t", "report", enabled=False, by="ops"))
    tasks, read = reader.recurring("t")
    assert (tasks["purge"].enabled, tasks["report"].enabled, read.scanned) == (False, False, 1)
    assert asked[-1] == [("t", 0, 1)]
