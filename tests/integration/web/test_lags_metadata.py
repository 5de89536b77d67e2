"""The Lags page against the real broker says what a partition's offset metadata is: the
string committed with the offset; "none" (with a tooltip saying how to commit some) where the
offset was committed without one; a dash where the group committed nothing. Never an empty
cell that reads as "not loaded"."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from starlette.testclient import TestClient

from conveyor import Admin, App, Consumer, Producer
from conveyor.web import WebTopics
from helpers import Record, running


def metadata_cells(page: str, topic: str) -> dict[int, str]:
    """The offset metadata cell of each of ``topic``'s rows in the per-partition table."""
    table = page.split('id="partition-lags"', 1)[1].split("</table>", 1)[0]
    cells = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        found = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        if found and found[1] == topic:
            cells[int(found[2])] = found[-1]
    return cells


def test_the_lags_page_says_none_for_an_offset_committed_without_metadata(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic: Callable[..., str], web_topics: WebTopics
) -> None:
    topic, group = new_topic(partitions=3), f"lags-metadata-{uuid.uuid4().hex[:8]}"
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for partition in (0, 1):  # partition 2 gets nothing: the group never commits there
            producer.produce_sync(topic=topic, partition=partition, payload=b"x")
    record = Record()

    class Marking(Consumer):
        def consume(self) -> None:
            last = self.messages.last
            if last.partition == 0:
                self.mark_as_consumed(last, metadata="cursor=0")
            record.add(last.partition)  # partition 1: marked after consume(), no metadata

    app = App(client_id="lags-metadata", max_wait_time=0.2,
              kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group,
                     "session.timeout.ms": 6_000})  # fmt: skip
    app.routes.topic(topic, Marking)
    app.web.enable(tracking_interval=0.5, topics=web_topics)
    with running(app):
        assert record.wait_for(lambda items: {0, 1} <= set(items), 30), record.items
    lags = {lag.partition: (lag.committed, lag.metadata) for lag in kafka_admin.read_lags([group])}
    assert lags == {0: (1, "cursor=0"), 1: (1, None), 2: (None, None)}

    client = TestClient(app.web.asgi())
    try:
        cells = metadata_cells(client.get("/lags").text, topic)
        assert cells[0] == "cursor=0"
        assert cells[1] == (
            '<span class="empty" title="committed without metadata: '
            'mark_as_consumed(message, metadata=...) commits some">none</span>'
        )
        assert cells[2] == (
            '<span class="empty" title="the group committed no offset here">\u2013</span>'
        )
    finally:
        client.close()
        app.web.data.stop()
