"""Records a sink cannot encode, for every built-in sink, against the real broker: a payload
the route cannot deserialize and a record the sink's ``encode`` refuses each reach the dead
letter queue with the reason, and the records around them reach the sink (for Broadcast:
its channels, which fan them out to their subscribers)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conveyor import Admin, Producer
from conveyor.connect.sinks import Broadcast, JsonLines, Postgres, Webhook
from conveyor.connect.sinks.records import record_json
from conveyor.messages import Message
from helpers import Record, running
from integration.connect.test_sinks import Endpoint, lines_of, make_app

pytestmark = pytest.mark.xdist_group("postgres")  # xdist: see tests/conftest.py

RECORDS = 10
NOT_JSON = 3  # its payload is no JSON: the route's deserializer refuses it
REFUSED = 6  # the sink's encode refuses it


def refusing_encode(record: Message) -> dict[str, Any]:
    document = record_json(record)
    if document["payload"]["seq"] == REFUSED:
        raise ValueError(f"seq {REFUSED} is not for this sink")
    return document


class Delivered:
    """A sink under test and how to read which sequence numbers it got."""

    def __init__(self, sink: Any, read: Callable[[], list[int]]) -> None:
        self.sink = sink
        self.read = read


def json_lines(_stack: ExitStack, tmp_path: Path, _request: pytest.FixtureRequest) -> Delivered:
    sink = JsonLines(tmp_path, encode=refusing_encode)
    return Delivered(sink, lambda: [line["payload"]["seq"] for line in lines_of(tmp_path)])


def webhook(stack: ExitStack, _tmp_path: Path, _request: pytest.FixtureRequest) -> Delivered:
    endpoint = stack.enter_context(Endpoint(fail_first=set(), reject=set()))
    return Delivered(
        Webhook(endpoint.url, encode=refusing_encode),
        lambda: [seq for _key, seq in endpoint.received],
    )


def postgres(_stack: ExitStack, _tmp_path: Path, request: pytest.FixtureRequest) -> Delivered:
    dsn: str = request.getfixturevalue("postgres_dsn")
    table = f"records_{uuid.uuid4().hex[:8]}"

    def read() -> list[int]:
        with psycopg.connect(dsn) as connection:
            rows = connection.execute(
                f"SELECT (payload->>'seq')::int FROM {table} ORDER BY \"offset\""
            ).fetchall()
        return [seq for (seq,) in rows]

    return Delivered(Postgres(dsn, table=table, encode=refusing_encode), read)


def broadcast(_stack: ExitStack, _tmp_path: Path, _request: pytest.FixtureRequest) -> Delivered:
    sink = Broadcast(port=0, encode=refusing_encode)
    sent: list[int] = []
    changed = threading.Condition()
    fan_out = sink._fan_out

    def recording(outgoing: list[tuple[str, str]]) -> None:  # on the server's loop, later
        with changed:
            sent.extend(json.loads(text)["payload"]["seq"] for _channel, text in outgoing)
            changed.notify_all()
        fan_out(outgoing)

    def read() -> list[int]:
        with changed:
            changed.wait_for(lambda: len(sent) >= RECORDS - 2, timeout=10)
            return list(sent)

    sink._fan_out = recording  # type: ignore[method-assign]
    return Delivered(sink, read)


SINKS = {"json_lines": json_lines, "webhook": webhook, "postgres": postgres, "broadcast": broadcast}


@pytest.fixture(params=sorted(SINKS))
def delivered(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Delivered]:
    with ExitStack() as stack:
        yield SINKS[request.param](stack, tmp_path, request)


def test_a_record_the_sink_cannot_encode_goes_to_the_dead_letter_queue_with_the_reason(
    kafka_bootstrap: str, new_topic, read_messages, kafka_admin: Admin, delivered: Delivered
) -> None:
    topic, dlq = new_topic(partitions=1), new_topic(partitions=1)
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {
                    "topic": topic,
                    "key": f"k{seq % 2}",
                    "payload": b"{not json" if seq == NOT_JSON else {"seq": seq},
                }
                for seq in range(RECORDS)
            ]
        )
    app = make_app(kafka_bootstrap, concurrency=2)
    app.routes.sink(topic, delivered.sink, lanes=2, dead_letter_queue=dlq)
    consumed = Record()
    app.monitor.subscribe("consumer.consumed", lambda event: consumed.add(event["count"]))
    with running(app):
        dead = read_messages(dlq, 2)
        assert consumed.wait_for(lambda counts: sum(counts) >= RECORDS, timeout=30)
    assert kafka_admin.read_watermark_offsets(dlq, 0)[1] == 2, "two dead letters, no more"
    reasons = {
        "not json" if message.value() == b"{not json" else json.loads(message.value())["seq"]: (
            dict(message.headers() or [])["original_error_message"].decode()
        )
        for message in dead
    }
    assert reasons.keys() == {"not json", REFUSED}
    assert reasons["not json"].startswith(f"cannot encode offset {NOT_JSON}:"), reasons
    assert "Deserializ" in reasons["not json"], reasons  # the deserializer's own words
    assert reasons[REFUSED].startswith(f"cannot encode offset {REFUSED}:"), reasons
    assert f"seq {REFUSED} is not for this sink" in reasons[REFUSED]
    assert sorted(delivered.read()) == [
        seq for seq in range(RECORDS) if seq not in (NOT_JSON, REFUSED)
    ]
