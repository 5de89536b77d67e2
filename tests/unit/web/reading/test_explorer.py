"""The explorer's pure parts: the filters (key, header, payload text, JSON path and value), how a message is shown
(JSON pretty-printed, text, binary as hex with its length) and exported (JSON lines), and
that a payload is never turned into markup."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conveyor.errors import ConfigurationError, KafkaError
from conveyor.web.reading.explorer import Explorer
from conveyor.web.reading.explorer_query import Filters, parse_json_path
from conveyor.web.reading.message_views import KEY_PREVIEW, export_line, message_view
from conveyor.web.ui.rendering import environment as _environment  # the UI's own Jinja environment
from unit.iterator.fakes import FakeClient
from unit.processing.fakes import FakeRaw

ORDER = b'{"order": {"id": 7, "paid": true, "items": [{"sku": "A-1"}, {"sku": "B-2"}]}}'


@pytest.mark.parametrize(
    ("filters", "matches"),
    [
        ({}, True),
        ({"key": "cust"}, True),
        ({"key": "nobody"}, False),
        ({"header": "source"}, True),
        ({"header": "source", "header_value": "web"}, True),
        ({"header": "source", "header_value": "app"}, False),
        ({"header": "missing"}, False),
        ({"contains": "B-2"}, True),
        ({"contains": "C-3"}, False),
        ({"json_path": "$.order.items[1].sku"}, True),
        ({"json_path": "order.items.1.sku", "json_value": "B-2"}, True),
        ({"json_path": "$.order.items[1].sku", "json_value": "A-1"}, False),
        ({"json_path": "$.order.id", "json_value": "7"}, True),
        ({"json_path": "$.order.id", "json_value": '"7"'}, False),
        ({"json_path": "$.order.paid", "json_value": "true"}, True),
        ({"json_path": "$.order.items[5]"}, False),
        ({"json_path": '$["order"].id'}, True),
        ({"key": "cust", "contains": "A-1", "json_path": "$.order.paid"}, True),
    ],
)
def test_filters_match_key_header_payload_and_json_path(
    filters: dict[str, str], matches: bool
) -> None:
    raw = FakeRaw(3, key=b"customer-9", value=ORDER, headers=[("source", b"web-shop")])
    assert Filters.parse(filters).matches(raw) is matches


def test_a_payload_that_is_not_json_never_matches_a_json_path() -> None:
    raw = FakeRaw(3, value=b"\xff\x00binary")
    assert not Filters.parse({"json_path": "$.a"}).matches(raw)
    assert not Filters.parse({"contains": "x"}).matches(FakeRaw(4, value=None))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"json_path": "$.a..b"}, "json_path"),
        ({"json_path": "$"}, "json_path"),
        ({"json_path": "a[x]"}, "json_path"),
        ({"json_value": "1"}, "json_value"),
        ({"header_value": "1"}, "header_value"),
    ],
)
def test_a_malformed_filter_names_its_field(fields: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Filters.parse(fields)
    assert refused.value.setting == named


def test_json_paths() -> None:
    assert parse_json_path("$.a.b[0].c") == ("a", "b", 0, "c")
    assert parse_json_path("a.b.0") == ("a", "b", 0)
    assert parse_json_path('$["odd key"].x') == ("odd key", "x")


def test_a_json_payload_is_pretty_printed_and_binary_is_hex_with_its_length() -> None:
    shown = message_view(FakeRaw(5, key=b"k", value=ORDER, headers=[("h", b"\xff\xfe")]))
    assert shown["payload"]["kind"] == "json"
    assert json.loads(shown["payload"]["pretty"]) == json.loads(ORDER)
    assert "\n  " in shown["payload"]["pretty"], "indented"
    assert shown["headers"] == [
        {"name": "h", "kind": "binary", "size": 2, "text": None, "hex": "ff fe", "truncated": False}
    ]
    binary = message_view(FakeRaw(6, value=bytes(range(256)) * 20))
    assert binary["payload"]["kind"] == "binary"
    assert binary["payload"]["size"] == 5120
    assert binary["payload"]["hex"].startswith("00 01 02")
    assert binary["payload"]["truncated"]
    assert message_view(FakeRaw(7, value=None))["payload"]["kind"] == "null"
    preview = message_view(FakeRaw(8, value=b"x" * 1000), full=False)["payload"]
    assert (preview["kind"], len(preview["preview"]), preview["cut"]) == ("text", 160, True)


def test_a_listing_cuts_a_long_key_and_keeps_it_whole_for_the_tooltip_and_the_message() -> None:
    long_key = "tenant-7/" + "customer-" * 30  # 279 characters
    listed = message_view(FakeRaw(1, key=long_key.encode(), value=b"{}"), full=False)["key"]
    assert len(listed["preview"]) == KEY_PREVIEW
    assert long_key.startswith(listed["preview"])
    assert (listed["cut"], listed["text"], listed["size"]) == (True, long_key, len(long_key))
    short = message_view(FakeRaw(2, key=b"customer-2", value=b"{}"), full=False)["key"]
    assert (short["preview"], short["cut"]) == ("customer-2", False)
    binary = message_view(FakeRaw(3, key=b"\xff" * 100, value=b"{}"), full=False)["key"]
    assert (binary["kind"], binary["cut"], binary["preview"][:8]) == ("binary", True, "ff ff ff")
    assert binary["preview"] == " ".join(["ff"] * 21), "whole bytes only"
    none = message_view(FakeRaw(4, key=None, value=b"{}"), full=False)["key"]
    assert (none["preview"], none["cut"]) == ("", False)
    assert "preview" not in message_view(FakeRaw(1, key=long_key.encode(), value=b"{}"))["key"]

    def page(messages: list[dict[str, Any]]) -> str:
        return _environment().get_template("explorer_topic.html").render(
            topic="t", partitions=[{"partition": 0, "low": 0, "high": 4, "messages": 4}],
            partition=0, start={"kind": "offset", "value": 0, "text": "from offset 0", "iso": None},
            filters={}, filtered=False, limit=50, low=0, high=4, first=0, scanned=4,
            next_offset=None, timed_out=False, messages=messages, scan_limit=20000,
            base="", title="Explorer: t", client_id="c", active="explorer",
            csrf_field="csrf_token", csrf_token="t", user=None, login=False, read_only=False,
            can=lambda *a: True, request=None,
        )  # fmt: skip

    shown = page([message_view(FakeRaw(o, key=k, value=b"{}"), full=False)
                  for o, k in ((1, long_key.encode()), (2, b"customer-2"), (3, b"\xff\xfe\x01"))])  # fmt: skip
    cell = f'<td class="message key" title="{long_key}">{long_key[:KEY_PREVIEW]}…</td>'
    assert cell in shown, "cut, with the whole key as the tooltip"
    assert '<td class="message key">customer-2</td>' in shown, "a short key whole, no tooltip"
    binary_cell = '<td class="message key" title="ff fe 01"><code>ff fe 01</code> <span class="badge stopped">binary</span></td>'
    assert binary_cell in shown, "a binary key: the start of its hex, readable"
    whole = _environment().get_template("explorer_message.html").render(
        message=message_view(FakeRaw(1, key=long_key.encode(), value=b"{}")), topic="t", base="",
        title="m", client_id="c", active="explorer", csrf_field="csrf_token", csrf_token="t",
        user=None, login=False, read_only=False, can=lambda *a: True, request=None,
    )  # fmt: skip
    assert f"<code>{long_key}</code>" in whole, "the message page shows the whole key"


def test_an_export_line_keeps_text_json_and_binary_apart() -> None:
    line: dict[str, Any] = json.loads(
        export_line(FakeRaw(9, key=b"\xff", value=ORDER, headers=[("h", b"v")]))
    )
    assert line["payload"] == {"json": json.loads(ORDER)}
    assert line["key"] == {"base64": "/w=="}
    assert line["headers"] == [["h", "v"]]
    assert (line["partition"], line["offset"]) == (0, 9)
    assert json.loads(export_line(FakeRaw(1, value=b"plain")))["payload"] == {"text": "plain"}


def test_a_script_payload_is_escaped_on_the_message_page() -> None:
    evil = b"<script>window.__pwned = 1</script>"
    shown = message_view(FakeRaw(1, key=b"<b>k</b>", value=evil, headers=[("<i>", b"<u>")]))
    page = _environment().get_template("explorer_message.html").render(
        message=shown, topic="t", base="", title="m", client_id="c", active="explorer",
        csrf_field="csrf_token", csrf_token="t", user=None, login=False, read_only=False,
        can=lambda *a: True, request=None,
    )  # fmt: skip
    assert "<script>window.__pwned" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "<b>k</b>" not in page
    assert "<i>" not in page


class SilentClient(FakeClient):
    """A partition with offsets 0-9 whose fetches bring nothing (a broker too slow to answer)."""

    def partitions(self, topic: str, timeout: float = 10.0) -> list[int]:
        return [0]

    def query_watermarks(
        self, topic: str, partition: int, timeout: float = 10.0
    ) -> tuple[int, int]:
        return 0, 10

    def close(self) -> None:
        pass


def test_a_one_message_read_that_times_out_is_kafka_not_answering_not_no_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The web UI answers 404 for an offset that holds no message, 504 when Kafka did not
    answer in time: a read cut short by its deadline must say so (it read as 404 before)."""
    now = [0.0]
    explorer = Explorer({"bootstrap.servers": "x"}, clock=lambda: now[0])
    monkeypatch.setattr(explorer.reading, "client", lambda: SilentClient([], now))
    with pytest.raises(KafkaError, match="timed out: no answer within 10 s") as raised:
        explorer.raw_message("orders", 0, 4)
    assert raised.value.name == "_TIMED_OUT"
    assert explorer.raw_message("orders", 0, 12) is None, "past the end: no message"
