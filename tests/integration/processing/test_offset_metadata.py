"""Offset metadata and seeking by time against the real broker: the metadata a consumer marks
is committed with its offset, read back by the partition's next owner after a restart, kept
by marks that give none, shown by Admin, the CLI and the web UI's lags page; a consumer that
seeks to a time goes on from the first message at or after it."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from conveyor import Admin, App, ConfigurationError, Consumer, Producer
from conveyor.cli.main import cli
from conveyor.web import WebTopics
from helpers import Record, running


def make_app(bootstrap: str, group: str) -> App:
    return App(
        client_id="metadata",
        kafka={"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6_000},
        max_wait_time=0.2,
    )


def produce(bootstrap: str, topic: str, payloads: list[str], **fields: Any) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": p, **fields} for p in payloads])


def committed(admin: Admin, group: str, topic: str) -> tuple[int | None, str | None]:
    [lag] = [lag for lag in admin.read_lags([group]) if lag.topic == topic]
    return lag.committed, lag.metadata


def test_marked_metadata_is_committed_and_read_back_by_the_next_owner(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic, tmp_path: Path, monkeypatch
) -> None:
    topic, group = new_topic(), f"metadata-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, topic, ["a", "b", "c"])
    record = Record()

    class Cursor(Consumer):
        def consume(self) -> None:
            record.add(("read", self.offset_metadata))
            for message in self.messages:
                record.add(message.offset)
                if message.raw_payload != b"plain":
                    self.mark_as_consumed(message, metadata=f"cursor={message.offset}")
            record.add(("marked", self.offset_metadata))

    first = make_app(kafka_bootstrap, group)
    first.routes.topic(topic, Cursor)
    with running(first):
        assert record.wait_for(lambda items: 2 in items, 30), record.items
    assert record.items[0] == ("read", None), "nothing was committed before"
    assert record.items[-1] == ("marked", "cursor=2")
    assert committed(kafka_admin, group, topic) == (3, "cursor=2")

    # A new owner: reads the metadata after its assignment; its marks without metadata
    # (the automatic one after consume) keep it.
    record.items.clear()
    produce(kafka_bootstrap, topic, ["plain"])
    second = make_app(kafka_bootstrap, group)
    second.routes.topic(topic, Cursor)
    with running(second):
        assert record.wait_for(lambda items: 3 in items, 30), record.items
    assert record.items[0] == ("read", "cursor=2")
    assert committed(kafka_admin, group, topic) == (4, "cursor=2")

    # The CLI's listing of a group's offsets has the column (and --json the field).
    monkeypatch.syspath_prepend(str(tmp_path))
    module = f"metadata_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        f"from conveyor import App\napp = App(client_id='m', kafka={{'bootstrap.servers': {kafka_bootstrap!r}}})\n"
    )
    try:
        runner = CliRunner()
        listed = runner.invoke(
            cli, ["groups", "lags", group, "--app", f"{module}:app"], env={"COLUMNS": "200"}
        )
        assert listed.exit_code == 0, listed.output
        assert "metadata" in listed.output
        assert "cursor=2" in listed.output
        as_json = json.loads(
            runner.invoke(cli, ["groups", "lags", group, "--app", f"{module}:app", "--json"]).output
        )
        assert [(row["committed"], row["metadata"]) for row in as_json] == [(4, "cursor=2")]
    finally:
        sys.modules.pop(module, None)


def test_a_sync_mark_commits_its_metadata_at_once_and_an_empty_string_clears_it(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic
) -> None:
    topic, group = new_topic(), f"metadata-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, topic, ["a", "b"])
    record = Record()

    class Syncing(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                if message.offset == 0:
                    record.add(self.mark_as_consumed_sync(message, metadata="first"))
                    record.add(committed(kafka_admin, group, topic))
                else:
                    self.mark_as_consumed(message, metadata="")
                    record.add("cleared")

    app = make_app(kafka_bootstrap, group)
    app.routes.topic(topic, Syncing, manual_offset_management=True)
    with running(app):
        assert record.wait_for(lambda items: "cleared" in items, 30), record.items
    assert record.items[:2] == [True, (1, "first")], (
        "committed before mark_as_consumed_sync returned"
    )
    assert committed(kafka_admin, group, topic) == (2, None)


def test_the_lags_page_shows_the_committed_metadata(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic, web_topics: WebTopics
) -> None:
    topic, group = new_topic(), f"metadata-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, topic, ["a"])
    record = Record()

    class Marking(Consumer):
        def consume(self) -> None:
            self.mark_as_consumed(self.messages.last, metadata="<batch 7>")
            record.add("marked")

    app = make_app(kafka_bootstrap, group)
    app.routes.topic(topic, Marking)
    app.web.enable(tracking_interval=0.5, topics=web_topics)
    with running(app):
        assert record.wait_for(lambda items: "marked" in items, 30)
    assert committed(kafka_admin, group, topic) == (1, "<batch 7>")
    client = TestClient(app.web.asgi())
    try:
        rows = client.get("/api/lags").json()["partitions"]
        assert [
            (r["topic"], r["committed"], r["metadata"]) for r in rows if r["topic"] == topic
        ] == [(topic, 1, "<batch 7>")]
        page = client.get("/lags").text
        assert "<th>offset metadata</th>" in page
        assert '<td class="wrap metadata">&lt;batch 7&gt;</td>' in page, "shown, escaped"
    finally:
        client.close()
        app.web.data.stop()


def test_seek_to_a_time_goes_on_from_the_first_message_at_or_after_it(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    # minutes apart, in the past (brokers refuse timestamps too far ahead)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {"topic": topic, "payload": str(n), "timestamp": start + timedelta(minutes=n)}
                for n in range(6)
            ]
        )
    record = Record()
    state: dict[str, Any] = {}

    class Rewinding(Consumer):
        def consume(self) -> None:
            record.add([message.offset for message in self.messages])
            if "sought" not in state and self.messages.last.offset == 5:
                with pytest.raises(ConfigurationError, match="offset"):
                    self.seek(start.replace(tzinfo=None))  # naive: which time zone?
                # 2 min 30 s in: the first message at or after it is offset 3
                state["sought"] = self.seek(start + timedelta(minutes=2, seconds=30))
            elif state.get("sought") is not None and "past" not in state:
                state["past"] = self.seek(start + timedelta(days=1))  # nothing that new: the end
                record.add([])

    app = make_app(kafka_bootstrap, f"seek-{uuid.uuid4().hex[:8]}")
    app.routes.topic(topic, Rewinding, max_messages=6)
    with running(app):
        assert record.wait_for(lambda items: "past" in state, 30), record.items
    assert state == {"sought": 3, "past": 6}
    batches = [batch for batch in record.items if batch]
    sought_in = next(i for i, batch in enumerate(batches) if batch[-1] == 5)
    assert batches[sought_in + 1][0] == 3, f"the next batch starts where the time is: {batches}"
