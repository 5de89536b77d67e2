"""The explorer and the dead letter queues against the real broker, through the UI's JSON
endpoints: filters and exports return exactly the matching messages (from an offset, a time
and the newest N), one message shows raw and decoded, republish copies it, bad input is
answered clearly; a DLQ is found from the routes, its dead letters grouped by origin and
error, and a redrive (one, then all) moves them back where the consumer processes them."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar

from starlette.testclient import TestClient

from conveyor import App, Consumer, Producer
from conveyor.web.reading.explorer import Explorer
from conveyor.web.reading.explorer_query import Filters, Start
from helpers import running

T0 = 1_760_000_000_000  # ms: the produced messages' timestamps are T0 + offset seconds


def new_app(bootstrap: str, group: str = "explorer-test") -> App:
    return App(
        client_id="explorer",
        kafka={"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6_000},
        concurrency=2,
        max_wait_time=0.2,
        pause_timeout=0.2,
    )


@contextmanager
def ui(app: App) -> Iterator[tuple[TestClient, str]]:
    """The app's web UI and the CSRF token of its session."""
    client = TestClient(app.web.asgi())
    try:
        page = client.get("/login")
        token = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert token, page.text
        yield client, token.group(1)
    finally:
        client.close()
        app.web.data.stop()


def fill(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """60 messages in partition 0 (keys k0..k2, a header, JSON with n, one binary and one
    with a script), 5 in partition 1; what was sent, in order."""
    sent = []
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(60):
            if n == 13:
                payload: bytes = bytes(range(256))
            elif n == 14:
                payload = b'<script>alert("x")</script>'
            else:
                payload = json.dumps({"n": n, "tags": ["even" if n % 2 == 0 else "odd"]}).encode()
            message = {
                "topic": topic, "partition": 0, "key": f"k{n % 3}", "payload": payload,
                "headers": [("kind", b"even" if n % 2 == 0 else b"odd")], "timestamp": T0 + n * 1000,
            }  # fmt: skip
            producer.produce_sync(**message)
            sent.append({**message, "offset": n})
        for n in range(5):
            producer.produce_sync(
                topic=topic, partition=1, key="p1", payload=json.dumps({"n": 100 + n})
            )
    return sent


def offsets(answer: Any) -> list[int]:
    assert answer.status_code == 200, answer.text
    return [message["offset"] for message in answer.json()["messages"]]


def test_the_explorer_reads_filters_exports_shows_and_republishes(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    other = new_topic(partitions=1)
    sent = fill(kafka_bootstrap, topic)
    app = new_app(kafka_bootstrap)
    with ui(app) as (client, token):
        base = f"/api/explorer/{topic}"
        everything = client.get(base, params={"partition": 0, "offset": 0, "limit": 1000})
        assert offsets(everything) == list(range(60))
        assert everything.json()["high"] == 60

        # filters: exactly the matching messages
        wanted = [m["offset"] for m in sent if m["key"] == "k1" and m["offset"] % 2 == 0]
        found = client.get(base, params={"offset": 0, "limit": 1000, "key": "k1", "header": "kind", "header_value": "even"})  # fmt: skip
        assert offsets(found) == wanted
        found = client.get(base, params={"offset": 0, "json_path": "$.n", "json_value": "42"})
        assert offsets(found) == [42]
        found = client.get(base, params={"offset": 0, "json_path": "$.tags[0]", "json_value": "odd", "limit": 1000})  # fmt: skip
        assert offsets(found) == [n for n in range(60) if n % 2 == 1 and n not in (13,)]
        found = client.get(base, params={"offset": 0, "contains": "script", "limit": 1000})
        assert offsets(found) == [14]

        # where a read starts: an offset, a time, the newest N; paging goes on from the last
        assert offsets(client.get(base, params={"offset": 57})) == [57, 58, 59]
        at = datetime.fromtimestamp(T0 / 1000 + 10.5, UTC).isoformat()
        assert offsets(client.get(base, params={"time": at, "limit": 3})) == [11, 12, 13]
        assert offsets(client.get(base, params={"newest": 4})) == [56, 57, 58, 59]
        first = client.get(base, params={"offset": 0, "limit": 10}).json()
        assert first["next_offset"] == 10
        assert offsets(client.get(base, params={"partition": 1, "newest": 50})) == list(range(5))

        # export: JSON lines of exactly the matching ones, bounded by the limit
        exported = client.get(f"/explorer/{topic}/export", params={"partition": 0, "offset": 0, "key": "k1", "limit": 1000})  # fmt: skip
        assert exported.status_code == 200
        assert exported.headers["content-disposition"].startswith("attachment")
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert [line["offset"] for line in lines] == [m["offset"] for m in sent if m["key"] == "k1"]
        assert lines[0]["payload"] == {"json": {"n": 1, "tags": ["odd"]}}
        assert lines[0]["headers"] == [["kind", "odd"]]
        bounded = client.get(
            f"/explorer/{topic}/export", params={"partition": "all", "offset": 0, "limit": 7}
        )
        assert len(bounded.text.splitlines()) == 7
        both = client.get(f"/explorer/{topic}/export", params={"partition": "all", "offset": 0, "json_path": "$.n", "limit": 1000})  # fmt: skip
        assert len(both.text.splitlines()) == 58 + 5, "every JSON message of both partitions"

        # an export that scans more than its bound ends with a line that says so
        bounded_scan = Explorer(app.settings.kafka, export_scan_limit=10)
        lines = list(
            bounded_scan.export(topic, [0], Start("offset", 0), Filters.parse({"key": "none"}))
        )
        assert [json.loads(line) for line in lines if line] == [
            {"export": {"complete": False, "reason": f"10 messages scanned (the limit), stopped in {topic}/0 at offset 9"}}
        ]  # fmt: skip
        exported = client.get(
            f"/explorer/{topic}/export", params={"partition": "all", "time": at, "limit": 1000}
        )
        assert [json.loads(line)["offset"] for line in exported.text.splitlines()][:2] == [
            11,
            12,
        ], "a time start is a time on every partition"

        # one message: decoded and raw
        shown = client.get(f"{base}/0/13").json()["message"]
        assert shown["payload"]["kind"] == "binary"
        assert shown["payload"]["size"] == 256
        shown = client.get(f"{base}/0/42").json()["message"]
        assert json.loads(shown["payload"]["pretty"]) == {"n": 42, "tags": ["even"]}
        assert shown["key"]["text"] == "k0"
        assert shown["headers"] == [{"name": "kind", "kind": "text", "size": 4, "text": "even"}]
        assert shown["timestamp"] == (T0 + 42_000) / 1000
        page = client.get(f"/explorer/{topic}/0/14")
        assert page.status_code == 200
        assert '<script>alert("x")</script>' not in page.text
        assert "&lt;script&gt;" in page.text

        # bad input: answered, never a hang or a traceback
        past = client.get(base, params={"offset": 500})
        assert past.status_code == 400
        assert "past the end" in past.json()["error"]
        malformed = client.get(base, params={"time": "yesterday noon"})
        assert malformed.status_code == 400
        assert "ISO 8601" in malformed.json()["error"]
        assert client.get(base, params={"partition": 9}).status_code == 400
        assert client.get("/api/explorer/no-such-topic-here").status_code == 404
        assert client.get(f"{base}/0/999").status_code == 404
        assert client.get(f"/explorer/{topic}", params={"json_path": "$..x"}).status_code == 400

        # republish: to another topic, key, payload and headers as they were
        copied = client.post(
            f"{base}/0/42/republish", json={"to": other}, headers={"X-CSRF-Token": token}
        )
        assert copied.status_code == 200, copied.text
        assert copied.json()["topic"] == other
        again = client.get(f"/api/explorer/{other}/0/{copied.json()['offset']}").json()["message"]
        assert (again["key"], again["payload"]["text"], again["headers"]) == (
            shown["key"],
            shown["payload"]["text"],
            shown["headers"],
        )
        refused = client.post(f"{base}/0/42/republish", json={"to": other})
        assert refused.status_code == 403, "no CSRF token"
        missing = client.post(f"{base}/0/42/republish", json={"to": "no-such-topic-here"}, headers={"X-CSRF-Token": token})  # fmt: skip
        assert missing.status_code == 400


class Flaky(Consumer):
    """Fails every message whose payload starts with "bad" until ``healed``; records what it
    processed."""

    healed: ClassVar[threading.Event] = threading.Event()
    processed: ClassVar[list[str]] = []
    seen: ClassVar[threading.Condition] = threading.Condition()

    def consume(self) -> None:
        for message in self.messages:
            text = message.raw_payload.decode()
            if text.startswith("bad") and not self.healed.is_set():
                raise ValueError(f"cannot take {text}")
            with self.seen:
                self.processed.append(text)
                self.seen.notify_all()
            self.mark_as_consumed(message)  # a failure after it dead-letters the next one


def wait_processed(check: Callable[[list[str]], bool], timeout: float = 30) -> list[str]:
    with Flaky.seen:
        assert Flaky.seen.wait_for(lambda: check(Flaky.processed), timeout), Flaky.processed
        return list(Flaky.processed)


def wait_redrive(client: TestClient, topic: str, job: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while job["state"] == "running":
        assert time.monotonic() < deadline, job
        threading.Event().wait(0.1)  # another thread moves it: its page is all there is to ask
        job = client.get(f"/api/dlq/{topic}/redrives/{job['id']}").json()["redrive"]
    return job


def test_a_dlq_is_grouped_and_redriven_back_to_the_consumer(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    dlq = new_topic(partitions=1)
    Flaky.healed.clear()
    Flaky.processed = []
    app = new_app(kafka_bootstrap, group=f"g-{topic}")
    app.routes.topic(topic, Flaky, dead_letter_queue={"topic": dlq, "max_retries": 0})
    with running(app), ui(app) as (client, token):
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            for text in ("ok-1", "bad-1", "ok-2", "bad-2", "bad-3", "ok-3"):
                producer.produce_sync(topic=topic, key=text, payload=text)
        wait_processed(lambda seen: seen == ["ok-1", "ok-2", "ok-3"])

        listed = client.get("/api/dlq").json()["dlqs"]
        [entry] = [d for d in listed if d["name"] == dlq]
        assert (entry["by"], entry["sources"]) == ("routes", [topic])
        deadline = time.monotonic() + 30
        while (page := client.get(f"/api/dlq/{dlq}").json())["total"] < 3:
            assert time.monotonic() < deadline, page
            threading.Event().wait(0.1)  # the dead letters are produced asynchronously
        [group] = page["groups"]
        assert (group["original_topic"], group["original_partition"]) == (topic, 0)
        assert (group["error_class"], group["count"]) == ("ValueError", 3)
        assert "cannot take bad" in group["sample"]
        letters = {letter["key"]: letter["ref"] for letter in page["letters"]}
        assert set(letters) == {"bad-1", "bad-2", "bad-3"}
        html = client.get(f"/dlq/{dlq}")
        assert html.status_code == 200, html.text[-2000:]
        assert "cannot take bad" in html.text

        Flaky.healed.set()
        chosen = [letters["bad-1"], letters["bad-3"]]
        refused = client.post(f"/api/dlq/{dlq}/redrive", json={"refs": chosen})
        assert refused.status_code == 403, "no CSRF token"
        started = client.post(f"/api/dlq/{dlq}/redrive", json={"refs": chosen},
                              headers={"X-CSRF-Token": token})  # fmt: skip
        assert started.status_code == 202, started.text
        job = wait_redrive(client, dlq, started.json())
        assert (job["state"], job["moved"], job["counts"]) == ("done", 2, {topic: 2})
        wait_processed(lambda seen: {"bad-1", "bad-3"} <= set(seen))
        assert "bad-2" not in Flaky.processed, "only the selected ones"

        started = client.post(
            f"/api/dlq/{dlq}/redrive", json={"all": True}, headers={"X-CSRF-Token": token}
        )
        job = wait_redrive(client, dlq, started.json())
        assert (job["state"], job["moved"]) == ("done", 3)
        seen = wait_processed(lambda seen: len(seen) == 8)
        assert sorted(seen) == sorted(
            ["ok-1", "ok-2", "ok-3", "bad-1", "bad-1", "bad-2", "bad-3", "bad-3"]
        ), seen

        gone = client.post(
            f"/api/dlq/{dlq}/redrive", json={"refs": ["0:999"]}, headers={"X-CSRF-Token": token}
        )
        job = wait_redrive(client, dlq, gone.json())
        assert (job["moved"], job["missing"]) == (0, ["0:999"])
        assert (
            client.post(
                f"/api/dlq/{dlq}/redrive", json={"refs": ["x"]}, headers={"X-CSRF-Token": token}
            ).status_code
            == 400
        )
        assert client.get("/api/dlq/not-a-dlq").status_code == 404
