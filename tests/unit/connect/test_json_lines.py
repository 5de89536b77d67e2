"""The JSON-lines sink: one line per record, fsync'd, rotated, rejects what it cannot encode."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conveyor.connect import Reject
from conveyor.connect.sinks import JsonLines, files
from conveyor.messages import Deserializers, Message
from unit.processing.fakes import FakeRaw


def messages(*offsets: int, **fields: Any) -> list[Message]:
    return [Message(FakeRaw(o, **fields), Deserializers()) for o in offsets]


def lines(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
        for line in path.read_text().splitlines()
    ]


def test_each_record_is_a_line(tmp_path: Path) -> None:
    sink = JsonLines(tmp_path)
    sink.open()
    assert sink.deliver(messages(0, 1, key=b"k", value=b'{"n": 1}')) == [None, None]
    sink.close()
    written = lines(tmp_path)
    assert [(line["offset"], line["key"], line["payload"]) for line in written] == [
        (0, "k", {"n": 1}),
        (1, "k", {"n": 1}),
    ]


def test_a_record_that_cannot_be_encoded_is_rejected(tmp_path: Path) -> None:
    def encode(record: Message) -> Any:
        if record.offset == 1:
            raise ValueError("unsupported")
        return {"offset": record.offset}

    sink = JsonLines(tmp_path, encode=encode)
    sink.open()
    results = sink.deliver(messages(0, 1, 2))
    assert results[0] is None
    assert isinstance(results[1], Reject)
    assert "unsupported" in results[1].reason
    assert results[2] is None
    sink.close()
    assert [line["offset"] for line in lines(tmp_path)] == [0, 2]


def test_files_rotate_by_size(tmp_path: Path) -> None:
    sink = JsonLines(tmp_path, max_bytes=200)
    sink.open()
    for offset in range(10):
        sink.deliver(messages(offset))
    sink.close()
    assert len(list(tmp_path.glob("*.jsonl"))) > 1
    assert [line["offset"] for line in lines(tmp_path)] == list(range(10))


def test_a_batch_is_on_disk_before_deliver_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync'd before deliver returns (so before the route marks the offsets): each fsync
    is of the file written now, with the whole batch already handed to the OS."""
    synced: list[int] = []  # the file's size on disk at each fsync

    def fsync(descriptor: int) -> None:
        synced.append(os.fstat(descriptor).st_size)
        os.fsync(descriptor)

    # the sink's own view of os only: other threads keep the real module
    monkeypatch.setattr(files, "os", SimpleNamespace(fsync=fsync, getpid=os.getpid))
    sink = JsonLines(tmp_path)
    sink.open()
    sink.deliver(messages(0, 1, 2))
    assert sink.path is not None
    assert synced == [sink.path.stat().st_size]
    assert synced[0] > 0
    sink.deliver(messages(3))
    assert synced[-1] == sink.path.stat().st_size > synced[0]
    sink.close()


def test_files_rotate_by_age(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_000_000.0]
    clock = SimpleNamespace(time=lambda: now[0], strftime=time.strftime, gmtime=time.gmtime)
    monkeypatch.setattr(files, "time", clock)
    sink = JsonLines(tmp_path, max_age=60)
    sink.open()
    sink.deliver(messages(0))
    now[0] += 59
    sink.deliver(messages(1))  # younger than max_age: the same file
    first = sink.path
    now[0] += 1
    sink.deliver(messages(2))  # 60 s old: a new file
    sink.close()
    assert first is not None
    assert sink.path is None
    files_written = sorted(tmp_path.glob("*.jsonl"))
    assert len(files_written) == 2
    assert [json.loads(line)["offset"] for line in first.read_text().splitlines()] == [0, 1]
    assert [line["offset"] for line in lines(tmp_path)] == [0, 1, 2]
