"""A test source plugin, named by its import path: a file's lines as the file source reads
them, but a line ``boom`` makes a record Kafka refuses (a header that is no text or bytes)
after the records before it in the same poll were handed to the producer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.connect.runtime.builtin_sources import FileLinesSource, FileSourceConnector
from conveyor.connect.runtime.plugins import SourceRecord


class FailingLines(FileLinesSource):
    def poll(self, timeout: float) -> list[SourceRecord]:
        records = super().poll(timeout)
        return [
            SourceRecord(
                r.topic,
                r.value,
                source_partition=r.source_partition,
                source_offset=r.source_offset,
                headers=[("bad", 5)],
            )  # type: ignore[list-item]
            if r.value == b"boom"
            else r
            for r in records
        ]


class FailingSourceConnector(FileSourceConnector):
    def task(self, config: Mapping[str, Any]) -> FailingLines:
        return FailingLines(config["file"], config["topic"], config["batch.size"])
