"""The JSON-lines sink: one line per record, fsync'd, rotated, rejects what it cannot encode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conveyor.connect import Reject
from conveyor.connect.sinks import JsonLines
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
